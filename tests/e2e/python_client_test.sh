#!/bin/bash
# End to end: the Python client package (client/python/rankd_client) against
# the real rankd (CPU backend).
#   numpy: requests sent as numpy arrays (and as JSON) through the sync and the
#          grpc.aio clients score bit for bit as `rankd score` does, for fp32
#          static tables with weighted multi-id bags and for a DYNAMIC bf16 table.
#   retry: 8 heavy calls at once at a model that queues 2 (one one-thread
#          worker): with the client's RetryPolicy every call ends OK, bit-exact,
#          while the server counts RESOURCE_EXHAUSTED rejections; without
#          retries some calls fail RESOURCE_EXHAUSTED.
source "$(dirname "$0")/lib.sh"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
gen_model "$MODELS" mini_dyn --preset mini --dynamic_tables 1 --dtype bf16 --seed 3
gen_model "$MODELS" heavy --preset mlperf --scale 0.00001
set_model_options "$MODELS/heavy/1" \
  "batching { max_queue_requests: 2 } instances { workers_per_device: 1 cpu_threads_per_worker: 1 }"
for m in mini mini_dyn; do
  gen_requests "$MODELS/$m/1" "$TMP/req_$m.jsonl" --count 12 --candidates 32 --seed 11
  gen_requests "$MODELS/$m/1" "$TMP/req_$m.small.jsonl" --count 8 --candidates 3 --bag_size 3 \
    --weighted --seed 12
  cat "$TMP/req_$m.small.jsonl" >>"$TMP/req_$m.jsonl"
  reference_scores "$MODELS/$m/1" "$TMP/req_$m.jsonl" "$TMP/want_$m.jsonl"
done
gen_requests "$MODELS/heavy/1" "$TMP/heavy.jsonl" --count 4 --candidates 128 --bag_size 1 --seed 21
reference_scores "$MODELS/heavy/1" "$TMP/heavy.jsonl" "$TMP/heavy_want.jsonl"

start_rankd "$MODELS"

check_py() {
  PYTHONPATH="$PY_CLIENT_PATH" run_bounded 120 "$PY" "$E2E_DIR/py_client_check.py" "$@" \
    --target "$TARGET" 2>"$TMP/py.err"
  local rc=$?
  cat "$TMP/py.err" >&2
  [[ "$rc" -eq 0 ]] || fail "py_client_check.py $1 ($2 ...): exit $rc"
}

for m in mini mini_dyn; do
  log "numpy and JSON, sync and aio: $m"
  check_py numpy --requests "$TMP/req_$m.jsonl" --expected "$TMP/want_$m.jsonl"
done

log "retries against a full queue"
check_py retry --requests "$TMP/heavy.jsonl" --expected "$TMP/heavy_want.jsonl" --calls 8
scrape "$TMP/metrics.txt"
rejected="$(metric_int "$TMP/metrics.txt" rankd_requests_total 'model="heavy"' 'code="RESOURCE_EXHAUSTED"')"
log "server: $rejected calls of heavy rejected RESOURCE_EXHAUSTED"
[[ -n "$rejected" && "$rejected" -ge 1 ]] ||
  fail "the server rejected no call RESOURCE_EXHAUSTED (got '$rejected'): the retries were never needed"
# Every call of both retried rounds ended OK: 8 each, plus those of the round
# without retries that were admitted.
ok="$(metric_int "$TMP/metrics.txt" rankd_requests_total 'model="heavy"' 'code="OK"')"
[[ -n "$ok" && "$ok" -ge 16 ]] || fail "heavy: $ok calls OK on the server, want at least 16"

stop_rankd
expect_eq "rankd exit status after SIGTERM" "$RANKD_RC" 0
finish
