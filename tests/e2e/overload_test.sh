#!/bin/bash
# End to end: a flood beyond the queue bound. One model whose model.pbtxt
# allows max_queue_requests: 2 in front of a single one-thread worker; 64
# heavy calls fired at once (tests/e2e/load_check.py flood): most must get
# RESOURCE_EXHAUSTED at once (median rejection under 1/4 of one call's compute
# time, the slowest under 1/2), every admitted call must succeed with the
# scores of `rankd score` (bit-exact), and the server's counters must agree.
#
# The model is the mlperf preset (DCN-v2, ~16 M multiply-adds per candidate)
# at a tiny table scale: 256-candidate requests cost ~0.3 s of compute each
# (one thread) yet, with one id per bag, are only ~30 KB on the wire (the
# server must receive, parse and validate every request before rejecting it),
# so that work cannot hide whether a rejection waited for compute (with kaggle,
# 2048-candidate requests of ~0.6 MB each make the flood's transfer as long as
# a batch).
source "$(dirname "$0")/lib.sh"

MODELS="$TMP/models"
gen_model "$MODELS" heavy --preset mlperf --scale 0.00001
set_model_options "$MODELS/heavy/1" \
  "batching { max_queue_requests: 2 } instances { workers_per_device: 1 cpu_threads_per_worker: 1 }"
gen_requests "$MODELS/heavy/1" "$TMP/heavy.jsonl" --count 4 --candidates 256 --bag_size 1 --seed 21
reference_scores "$MODELS/heavy/1" "$TMP/heavy.jsonl" "$TMP/heavy_want.jsonl"

start_rankd "$MODELS"
scrape "$TMP/metrics_before.txt"

PYTHONPATH="$PY_CLIENT_PATH" run_bounded 150 "$PY" "$E2E_DIR/load_check.py" flood --target "$TARGET" \
  --requests "$TMP/heavy.jsonl" --expected "$TMP/heavy_want.jsonl" --calls 64 --min_ok 3 \
  >"$TMP/flood.json" 2>"$TMP/flood.err"
FLOOD_RC=$?
cat "$TMP/flood.err" >&2
[[ $FLOOD_RC -eq 0 ]] || fail "load_check.py flood failed (exit $FLOOD_RC)"
SUMMARY="$(tail -n 1 "$TMP/flood.json")"
log "flood: $SUMMARY"
json_field() { "$PY" -c 'import json, sys; print(json.loads(sys.argv[1]).get(sys.argv[2], 0))' "$SUMMARY" "$1"; }
N_OK="$(json_field OK)"
N_REJECTED="$(json_field RESOURCE_EXHAUSTED)"
expect_eq "flood calls accounted for" "$((N_OK + N_REJECTED))" 64

# The server saw the same: 2 lone calls + the flood's OK ones + 1 after.
scrape "$TMP/metrics.txt"
expect_eq "rankd_requests_total{code=OK}" \
  "$(metric_int "$TMP/metrics.txt" rankd_requests_total 'model="heavy"' 'code="OK"')" $((N_OK + 3))
expect_eq "rankd_requests_total{code=RESOURCE_EXHAUSTED}" \
  "$(metric_int "$TMP/metrics.txt" rankd_requests_total 'model="heavy"' 'code="RESOURCE_EXHAUSTED"')" \
  "$N_REJECTED"
# Rejected calls were never computed: candidates scored = OK calls + warm-up (1 + 64).
expect_eq "rankd_candidates_total" \
  "$(metric_int "$TMP/metrics.txt" rankd_candidates_total 'model="heavy"')" $(((N_OK + 3) * 256 + 65))
# The queue never held more than its bound, and is empty now.
expect_eq "rankd_queue_requests after the flood" \
  "$(metric_int "$TMP/metrics.txt" rankd_queue_requests 'model="heavy"')" 0

stop_rankd
expect_eq "rankd exit status after SIGTERM" "$RANKD_RC" 0
finish
