#!/bin/bash
# End to end: short deadlines get DEADLINE_EXCEEDED while the (single,
# one-thread) worker is busy, and are never computed; the calls keeping it
# busy still succeed bit-exactly.
#  1. tests/e2e/load_check.py deadline: 6 heavy calls (60 s deadline) keep the
#     worker busy ~6 x 0.2 s; 8 more carry a deadline of 1/4 of one call's
#     compute: all 8 DEADLINE_EXCEEDED near their deadline, counted so by the
#     server, their candidates never scored.
#  2. rankctl score --deadline_ms 1 on heavy requests while rankctl keeps the
#     worker busy: every line DEADLINE_EXCEEDED, exit code 1.
# Model: see overload_test.sh (mlperf preset, tiny tables); here the queue is
# unbounded and a batch holds one 128-candidate request. Deadline-aware
# admission is off: with it, the short-deadline calls would be refused at
# once (RESOURCE_EXHAUSTED; engine/serving/dynamic_batcher.h) rather than
# queued, and this test is about the queue's expiry path.
source "$(dirname "$0")/lib.sh"

MODELS="$TMP/models"
gen_model "$MODELS" heavy --preset mlperf --scale 0.00001
set_model_options "$MODELS/heavy/1" \
  "batching { max_batch_candidates: 128 disable_deadline_admission: true } instances { workers_per_device: 1 cpu_threads_per_worker: 1 }"
gen_requests "$MODELS/heavy/1" "$TMP/heavy.jsonl" --count 4 --candidates 128 --bag_size 1 --seed 31
reference_scores "$MODELS/heavy/1" "$TMP/heavy.jsonl" "$TMP/heavy_want.jsonl"

start_rankd "$MODELS"

# --- 1. Python, async calls --------------------------------------------------
PYTHONPATH="$PY_CLIENT_PATH" run_bounded 150 "$PY" "$E2E_DIR/load_check.py" deadline --target "$TARGET" \
  --requests "$TMP/heavy.jsonl" --expected "$TMP/heavy_want.jsonl" --busy 6 --calls 8 \
  >"$TMP/deadline.json" 2>"$TMP/deadline.err"
RC=$?
cat "$TMP/deadline.err" >&2
[[ $RC -eq 0 ]] || fail "load_check.py deadline failed (exit $RC)"
log "deadline: $(tail -n 1 "$TMP/deadline.json")"

scrape "$TMP/metrics.txt"
# OK: 2 lone + 6 busy + 1 after.
expect_eq "rankd_requests_total{code=OK}" \
  "$(metric_int "$TMP/metrics.txt" rankd_requests_total 'model="heavy"' 'code="OK"')" 9
expect_eq "rankd_requests_total{code=DEADLINE_EXCEEDED}" \
  "$(metric_int "$TMP/metrics.txt" rankd_requests_total 'model="heavy"' 'code="DEADLINE_EXCEEDED"')" 8
expect_eq "rankd_candidates_total (expired calls never computed)" \
  "$(metric_int "$TMP/metrics.txt" rankd_candidates_total 'model="heavy"')" $((9 * 128 + 65))

# --- 2. rankctl --deadline_ms 1 while the worker is busy ----------------------
cat "$TMP/heavy.jsonl" "$TMP/heavy.jsonl" >"$TMP/busy.jsonl"  # 8 x ~0.2 s
cat "$TMP/heavy_want.jsonl" "$TMP/heavy_want.jsonl" >"$TMP/busy_want.jsonl"
rankctl score --input "$TMP/busy.jsonl" --output "$TMP/busy_out.jsonl" --concurrency 8 \
  --deadline_ms 60000 2>"$TMP/busy.err" &
BUSY_PID=$!
track_pid "$BUSY_PID"
sleep 0.3
rankctl score --input "$TMP/heavy.jsonl" --output "$TMP/short_out.jsonl" --concurrency 4 \
  --deadline_ms 1 2>"$TMP/short.err"
expect_eq "rankctl --deadline_ms 1: exit code" "$?" 1
cat "$TMP/short.err" >&2
expect_eq "rankctl --deadline_ms 1: DEADLINE_EXCEEDED lines" \
  "$(grep -Ec '^rankctl score: .*:[0-9]+: DEADLINE_EXCEEDED: .*\(--deadline_ms=1\)$' "$TMP/short.err")" 4
expect_grep "rankctl --deadline_ms 1: summary" "$TMP/short.err" '^rankctl score: 0 ok, 4 failed'
wait "$BUSY_PID"
expect_eq "busy rankctl exit code" "$?" 0
compare_scores "busy calls" "$TMP/busy_want.jsonl" "$TMP/busy_out.jsonl"

scrape "$TMP/metrics2.txt"
expect_eq "rankd_requests_total{code=OK} after rankctl" \
  "$(metric_int "$TMP/metrics2.txt" rankd_requests_total 'model="heavy"' 'code="OK"')" 17
# Whatever of the 1 ms calls reached the server was not computed.
expect_eq "rankd_candidates_total after rankctl" \
  "$(metric_int "$TMP/metrics2.txt" rankd_candidates_total 'model="heavy"')" $((17 * 128 + 65))

# --- 3. Calls their client cancels while they are queued ---------------------
# The server learns of the cancellation (gRPC's OnCancel on the callback
# API; on the completion-queue front, when gRPC reports the call done) and
# never computes them. Same call pattern as part 1 (2 lone, 6 busy, 1 after),
# plus 4 cancelled; on a second server with the front, the same again.
# cancel_round LABEL OK_BEFORE CANDIDATES_BEFORE: the cancellations on the
# running server, whose counters stood at those values.
cancel_round() {
  PYTHONPATH="$PY_CLIENT_PATH" run_bounded 150 "$PY" "$E2E_DIR/load_check.py" cancel --target "$TARGET" \
    --requests "$TMP/heavy.jsonl" --expected "$TMP/heavy_want.jsonl" --busy 6 --calls 4 \
    >"$TMP/cancel_$1.json" 2>"$TMP/cancel_$1.err"
  local rc=$?
  cat "$TMP/cancel_$1.err" >&2
  [[ $rc -eq 0 ]] || fail "$1: load_check.py cancel failed (exit $rc)"
  scrape "$TMP/metrics_$1.txt"
  expect_eq "$1: rankd_requests_total{code=CANCELLED}" \
    "$(metric_int "$TMP/metrics_$1.txt" rankd_requests_total 'model="heavy"' 'code="CANCELLED"')" 4
  expect_eq "$1: rankd_requests_total{code=OK} after the cancellations" \
    "$(metric_int "$TMP/metrics_$1.txt" rankd_requests_total 'model="heavy"' 'code="OK"')" $(($2 + 9))
  expect_eq "$1: rankd_candidates_total (cancelled calls never computed)" \
    "$(metric_int "$TMP/metrics_$1.txt" rankd_candidates_total 'model="heavy"')" $(($3 + 9 * 128))
}
cancel_round callback_api 17 $((17 * 128 + 65))

stop_rankd
expect_eq "rankd exit status after SIGTERM" "$RANKD_RC" 0

start_rankd "$MODELS" --rpc_threads 2
cancel_round cq_front 0 65  # the load's warm-up batch counts 65 candidates
stop_rankd
expect_eq "rankd (completion-queue front) exit status after SIGTERM" "$RANKD_RC" 0
finish
