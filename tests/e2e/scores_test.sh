#!/bin/bash
# End to end: scores served by the real rankd (through rankctl, the C++
# client, and through the Python client) are bit-exact equal to `rankd score`
# (the server-less CPU engine) on the same requests, for three models:
#   mini                       (fp32 static tables)
#   kaggle --scale 0.001       (26 tables, DLRM Kaggle shapes)
#   mini_dyn --dynamic_tables 1 --dtype bf16  (a DYNAMIC hash table, bf16 rows)
# Requests mix sizes (64 and 5 candidates; weighted multi-id bags) and are
# sent concurrently, so the server batches them differently from `rankd score`:
# the CPU engine must not depend on batching. The server answers Score on
# gRPC's callback API (the default) and, last, on its completion-queue front.
source "$(dirname "$0")/lib.sh"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
gen_model "$MODELS" kaggle --preset kaggle --scale 0.001
gen_model "$MODELS" mini_dyn --preset mini --dynamic_tables 1 --dtype bf16 --seed 3

for m in mini kaggle mini_dyn; do
  gen_requests "$MODELS/$m/1" "$TMP/req_$m.jsonl" --count 24 --candidates 64 --seed 11
  gen_requests "$MODELS/$m/1" "$TMP/req_$m.small.jsonl" --count 16 --candidates 5 --bag_size 3 \
    --weighted --seed 12
  cat "$TMP/req_$m.small.jsonl" >>"$TMP/req_$m.jsonl"
  reference_scores "$MODELS/$m/1" "$TMP/req_$m.jsonl" "$TMP/want_$m.jsonl"
  expect_eq "$m: reference responses" "$(wc -l <"$TMP/want_$m.jsonl")" 40
done

start_rankd "$MODELS"

for m in mini kaggle mini_dyn; do
  # rankctl (C++ client), 8 calls in flight.
  rankctl score --input "$TMP/req_$m.jsonl" --output "$TMP/rankctl_$m.jsonl" --concurrency 8 \
    --deadline_ms 30000 2>"$TMP/rankctl_$m.err" || fail "$m: rankctl score failed: $(cat "$TMP/rankctl_$m.err")"
  expect_grep "$m: rankctl summary" "$TMP/rankctl_$m.err" '^rankctl score: 40 ok, 0 failed'
  compare_scores "$m via rankctl" "$TMP/want_$m.jsonl" "$TMP/rankctl_$m.jsonl"

  # Python client (4 threads).
  PYTHONPATH="$PY_CLIENT_PATH" run_bounded 120 "$PY" "$E2E_DIR/e2e_util.py" py-score \
    --target "$TARGET" --input "$TMP/req_$m.jsonl" --output "$TMP/py_$m.jsonl" \
    2>"$TMP/py_$m.err" || fail "$m: Python client failed: $(tail -5 "$TMP/py_$m.err")"
  compare_scores "$m via Python" "$TMP/want_$m.jsonl" "$TMP/py_$m.jsonl"
done

# The server's own count of successful Score RPCs: 2 clients x 40 per model.
scrape "$TMP/metrics.txt"
for m in mini kaggle mini_dyn; do
  expect_eq "$m: rankd_requests_total{code=OK}" \
    "$(metric_int "$TMP/metrics.txt" rankd_requests_total "model=\"$m\"" 'code="OK"')" 80
done

stop_rankd
expect_eq "rankd exit status after SIGTERM" "$RANKD_RC" 0

# rankd.v1.Ranking on the completion-queue front (--rpc_threads 2) instead of
# gRPC's callback API above: the same scores, through both clients.
start_rankd "$MODELS" --rpc_threads 2
rankctl score --input "$TMP/req_kaggle.jsonl" --output "$TMP/cq_kaggle.jsonl" \
  --concurrency 8 --deadline_ms 30000 2>"$TMP/cq_kaggle.err" ||
  fail "completion-queue front: rankctl score failed: $(cat "$TMP/cq_kaggle.err")"
compare_scores "kaggle via the completion-queue front" "$TMP/want_kaggle.jsonl" "$TMP/cq_kaggle.jsonl"
PYTHONPATH="$PY_CLIENT_PATH" run_bounded 120 "$PY" "$E2E_DIR/e2e_util.py" py-score \
  --target "$TARGET" --input "$TMP/req_kaggle.jsonl" --output "$TMP/cq_py_kaggle.jsonl" \
  2>"$TMP/cq_py_kaggle.err" || fail "completion-queue front: Python client failed"
compare_scores "kaggle via the front, Python" "$TMP/want_kaggle.jsonl" "$TMP/cq_py_kaggle.jsonl"
stop_rankd
expect_eq "rankd (completion-queue front) exit status after SIGTERM" "$RANKD_RC" 0
finish
