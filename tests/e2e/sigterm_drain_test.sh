#!/bin/bash
# End to end: SIGTERM during load loses no admitted request, and no request
# is answered CANCELLED (issue 17, defect 9: a request in flight at SIGTERM
# was answered CANCELLED in 3 of 4 runs, a code clients do not retry).
# rankctl keeps 16 heavy calls in flight against a single worker; once some
# have completed, the test snapshots /metrics (OK so far: M; admitted and
# waiting in the batcher: Q) and sends SIGTERM. Then:
#   - rankd exits 0 after logging the drain, having answered every admitted
#     request before --drain_timeout: no drain-timeout warning, and the drain
#     it logs is shorter than the timeout (it ended when the last admitted
#     request was answered, not when the timeout ran out). How long the
#     drain takes is the queued work's compute time, which a sanitizer build
#     sharing 2 cores with other tests stretches tens of times; the generous
#     timeout leaves it room;
#   - every line either succeeded with the scores of `rankd score`
#     (bit-exact) or failed UNAVAILABLE (never admitted, retryable), never
#     CANCELLED;
#   - at least M + Q lines succeeded: everything admitted before SIGTERM
#     (the Q queued ones included) got its scores;
#   - some lines did fail (the signal really came during the load).
# The whole is repeated ROUNDS times: the CANCELLED answers came from a race
# (requests reaching the server after its gRPC Shutdown began), which one
# round may miss.
source "$(dirname "$0")/lib.sh"

MODELS="$TMP/models"
gen_model "$MODELS" kaggle --preset kaggle --scale 0.001
# One request per batch (256 candidates): the calls in flight then wait in
# the batcher's queue, where /metrics shows them (rankd_queue_requests),
# rather than inside one big executing batch, which it does not. Deadline
# admission off: every request must be admitted until SIGTERM, and on a
# loaded machine (CI's ASan stage) a stall can make the measured drain rate
# so slow that the 16th call would be refused as overloaded
# (RESOURCE_EXHAUSTED), which is not what this test is about.
set_model_options "$MODELS/kaggle/1" \
  "batching { max_batch_candidates: 256 disable_deadline_admission: true }
   instances { workers_per_device: 1 }"
gen_requests "$MODELS/kaggle/1" "$TMP/req1.jsonl" --count 25 --candidates 256 --seed 51
reference_scores "$MODELS/kaggle/1" "$TMP/req1.jsonl" "$TMP/want1.jsonl"
: >"$TMP/req.jsonl"
: >"$TMP/want.jsonl"
for _ in $(seq 12); do  # 300 lines, far more than the drain leaves time for
  cat "$TMP/req1.jsonl" >>"$TMP/req.jsonl"
  cat "$TMP/want1.jsonl" >>"$TMP/want.jsonl"
done
TOTAL=$(wc -l <"$TMP/req.jsonl")

ROUNDS=3
# A round whose load ends before the queue was seen (the client, which shares
# the cores, was slower than the server) proves nothing: it is run again, at
# most RETRIES times in all.
RETRIES=4
DRAIN_TIMEOUT_S=90
for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
  log "round $ROUND of $ROUNDS"
  # One compute thread: the server, not the client, is the bottleneck, so
  # the calls in flight wait in the queue.
  start_rankd "$MODELS" --drain_timeout "${DRAIN_TIMEOUT_S}s" --cpu_threads 1

  rankctl score --input "$TMP/req.jsonl" --output "$TMP/got.$ROUND.jsonl" --concurrency 16 \
    --deadline_ms 60000 2>"$TMP/rankctl.$ROUND.err" &
  CTL_PID=$!
  track_pid "$CTL_PID"

  # Wait (bounded) until the load is well under way and requests are waiting in
  # the batcher (on a loaded 2-core machine the queue can be briefly short), and
  # send SIGTERM right after the snapshot that showed it.
  OK_SO_FAR=0
  Q=0
  for ((i = 0; i < 400; i++)); do
    scrape "$TMP/metrics_before.txt"
    OK_SO_FAR="$(metric_int "$TMP/metrics_before.txt" rankd_requests_total 'model="kaggle"' 'code="OK"')"
    Q="$(metric_int "$TMP/metrics_before.txt" rankd_queue_requests 'model="kaggle"')"
    [[ -n "$OK_SO_FAR" && "$OK_SO_FAR" -ge 40 && -n "$Q" && "$Q" -ge 4 ]] && break
    kill -0 "$CTL_PID" 2>/dev/null || break
    sleep 0.02
  done
  if ! kill -0 "$CTL_PID" 2>/dev/null && [[ "$RETRIES" -gt 0 ]]; then
    RETRIES=$((RETRIES - 1))
    log "round $ROUND: the load ended before a queue was seen ($OK_SO_FAR OK, $Q queued); running it again"
    wait "$CTL_PID"
    stop_rankd TERM
    ROUND=$((ROUND - 1))
    continue
  fi
  [[ -n "$OK_SO_FAR" && "$OK_SO_FAR" -ge 40 ]] || die "load did not get going: $OK_SO_FAR OK"
  M=$OK_SO_FAR
  log "before SIGTERM: $M OK, $Q queued in the batcher"
  [[ "$Q" -ge 4 ]] || fail "only $Q queued when SIGTERM was sent (16 in flight): the test proves little"
  stop_rankd TERM $((DRAIN_TIMEOUT_S + 20))
  expect_eq "rankd exit status after SIGTERM" "$RANKD_RC" 0
  expect_grep "drain logged" "$RANKD_LOG" 'SIGTERM received: not serving, draining'
  expect_grep "exit logged" "$RANKD_LOG" 'drained in .* s; exiting'
  if grep -q -- '--drain_timeout .* passed with' "$RANKD_LOG"; then
    fail "round $ROUND: the drain timed out with admitted requests unanswered"
  fi
  DRAINED_S="$(sed -n 's/.*drained in \([0-9.]*\) s; exiting.*/\1/p' "$RANKD_LOG")"
  log "drained in ${DRAINED_S:-?} s (timeout ${DRAIN_TIMEOUT_S} s)"
  if ! awk -v d="$DRAINED_S" -v t="$DRAIN_TIMEOUT_S" 'BEGIN { exit !(d != "" && d + 0 < t) }'; then
    fail "round $ROUND: drain of '${DRAINED_S}' s, want under the ${DRAIN_TIMEOUT_S} s timeout"
  fi

  # rankctl finishes quickly once the server is gone (UNAVAILABLE).
  for ((i = 0; i < 600; i++)); do kill -0 "$CTL_PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$CTL_PID" 2>/dev/null && die "rankctl still running 60 s after rankd exited"
  wait "$CTL_PID"
  CTL_RC=$?

  check_admitted_answered "SIGTERM" "$TMP/rankctl.$ROUND.err" "$TMP/got.$ROUND.jsonl" "$TMP/want.jsonl" \
    "$TOTAL" "$M" "$Q" UNAVAILABLE
  if [[ "$CTL_RC" != 3 ]]; then
    fail "rankctl exit code (UNAVAILABLE lines): got '$CTL_RC', want '3'"
    log "rankctl stderr (lines not about UNAVAILABLE):"
    grep -v 'UNAVAILABLE' "$TMP/rankctl.$ROUND.err" | tail -n 30 >&2
  fi
  # Informational: over one HTTP/2 connection the OK lines are normally a prefix.
  FIRST_FAILED="$(head -n 1 "$TMP/failed.txt" | awk '{print $1}')"
  log "first failed line: ${FIRST_FAILED:-none}; OK lines: $N_OK"
  CANCELLED_LINES="$(awk '$2 == "CANCELLED"' "$TMP/failed.txt" | wc -l)"
  expect_eq "round $ROUND: lines answered CANCELLED" "$CANCELLED_LINES" 0
  expect_grep "round $ROUND: new requests refused during the drain" "$RANKD_LOG" \
    'new requests are answered UNAVAILABLE'
done
finish
