#!/bin/bash
# End to end: the KServe v2 front end (inference.GRPCInferenceService on the
# public port), called through Python grpcio with stubs compiled from the
# test's own copy of the protocol (tests/e2e/kserve/grpc_predict_v2.proto,
# written apart from the server's): ModelInfer scores, with typed and with
# raw contents, equal `rankd score` bit for bit (CPU backend) on two models;
# live / ready, metadata and the protocol's errors answer as specified; and
# ModelInfer counts in rankd_requests_total like Score.
source "$(dirname "$0")/lib.sh"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
gen_model "$MODELS" kaggle --preset kaggle --scale 0.001
for m in mini kaggle; do
  gen_requests "$MODELS/$m/1" "$TMP/req_$m.jsonl" --count 12 --candidates 33 --seed 21
  gen_requests "$MODELS/$m/1" "$TMP/req_$m.w.jsonl" --count 8 --candidates 4 --bag_size 3 \
    --weighted --seed 22
  cat "$TMP/req_$m.w.jsonl" >>"$TMP/req_$m.jsonl"
  reference_scores "$MODELS/$m/1" "$TMP/req_$m.jsonl" "$TMP/want_$m.jsonl"
done

start_rankd "$MODELS"

STUBS="$TMP/kserve_stubs"
mkdir -p "$STUBS"
(cd "$E2E_DIR/kserve" && run_bounded 60 "$PY" -m grpc_tools.protoc -I. --python_out="$STUBS" \
  --grpc_python_out="$STUBS" grpc_predict_v2.proto) >"$TMP/kserve_stubs.log" 2>&1 ||
  die "kserve stubs: $(cat "$TMP/kserve_stubs.log")"
kserve() { PYTHONPATH="$STUBS" run_bounded 120 "$PY" "$E2E_DIR/kserve_check.py" "$@"; }

for m in mini kaggle; do
  for form in typed raw; do
    kserve infer --target "$TARGET" --input "$TMP/req_$m.jsonl" --form $form \
      --output "$TMP/got_${m}_$form.jsonl" 2>"$TMP/kserve_$m.err" ||
      fail "$m: ModelInfer ($form) failed: $(tail -5 "$TMP/kserve_$m.err")"
    compare_scores "$m via KServe ModelInfer ($form contents)" "$TMP/want_$m.jsonl" \
      "$TMP/got_${m}_$form.jsonl"
  done
done
out="$(kserve checks --target "$TARGET" --input "$TMP/req_mini.jsonl" --model mini 2>&1)" ||
  fail "KServe checks: $out"
echo "$out" >"$TMP/kserve_checks.txt"
expect_grep "KServe checks" "$TMP/kserve_checks.txt" "^kserve checks: ok$"

scrape "$TMP/metrics.txt"
for m in mini kaggle; do
  expect_eq "$m: rankd_requests_total{code=OK,protocol=kserve} (2 forms x 20)" \
    "$(metric_int "$TMP/metrics.txt" rankd_requests_total "model=\"$m\"" 'code="OK"' 'protocol="kserve"')" 40
done

stop_rankd
expect_eq "rankd exit status after SIGTERM" "$RANKD_RC" 0
finish
