#!/bin/bash
# End to end: server reflection (grpc.reflection.v1alpha) of the real rankd,
# through tests/e2e/reflection_check.py: list_services lists rankd.v1.Ranking
# (and Health, and reflection itself); file_containing_symbol returns
# rankd/v1/ranking.proto with the wire contract's methods and field numbers;
# a Score call built from the reflected descriptors alone is answered with
# the same scores as `rankd score`.
source "$(dirname "$0")/lib.sh"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
gen_requests "$MODELS/mini/1" "$TMP/req.jsonl" --count 1 --candidates 16
reference_scores "$MODELS/mini/1" "$TMP/req.jsonl" "$TMP/want.jsonl"

start_rankd "$MODELS"
run_bounded 120 "$PY" "$E2E_DIR/reflection_check.py" --target "$TARGET" \
  --stubs_dir "$TMP/reflection_stubs" --request_json "$TMP/req.jsonl" \
  --expected_json "$TMP/want.jsonl" || fail "reflection_check.py failed"
stop_rankd
expect_eq "rankd exit status after SIGTERM" "$RANKD_RC" 0
finish
