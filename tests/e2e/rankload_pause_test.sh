#!/bin/bash
# End to end: coordinated omission. The server is paused for 500 ms
# (SIGSTOP / SIGCONT) one second into the measured window of a run.
#  - Open loop (1000 req/s): requests keep being scheduled during the pause
#    and their latency counts from the scheduled send time, so the live
#    interval holding the pause reports p99 >= 400 ms, and so does the whole
#    window (about 1/8 of its requests waited).
#  - Closed loop of the same length (1 in flight): the one request in flight
#    waits 500 ms (its max shows the pause happened), but no request is sent
#    during the pause, so every p99 it reports stays far below 400 ms: the
#    under-reporting the open loop corrects.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/rankload_lib.sh"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
start_rankd "$MODELS"

# run_with_pause NAME ARGS...: rankload in the background; once its live line
# for the end of second 2 (1 s after the warm-up) appears, SIGSTOP rankd for
# 0.5 s.
run_with_pause() {
  local name="$1" i
  shift
  rankload "$@" --warmup_s 1 --duration_s 4 --deadline_ms 10000 \
    --json "$TMP/$name.json" >"$TMP/$name.txt" 2>"$TMP/$name.err" &
  local pid=$!
  track_pid "$pid"
  for ((i = 0; i < 600; i++)); do  # up to 30 s
    grep -q '^\[  2\.0s\]' "$TMP/$name.err" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  grep -q '^\[  2\.0s\]' "$TMP/$name.err" || die "$name: no live line for 2.0 s: $(cat "$TMP/$name.err")"
  kill -STOP "$RANKD_PID"
  sleep 0.5
  kill -CONT "$RANKD_PID"
  log "$name: rankd paused for 0.5 s"
  wait "$pid"
  expect_eq "$name: rankload exit code" "$?" 0
  cat "$TMP/$name.err" >&2
}

run_with_pause open --model mini --rate 1000
R="$TMP/open.json"
OPEN_WINDOW_P99="$(rj "$R" 'max(i["p99_us"] for i in intervals(0))')"
OPEN_P99="$(rj "$R" 'r["steps"][0]["latency_us"]["p99"]')"
OPEN_MAX="$(rj "$R" 'r["steps"][0]["latency_us"]["max"]')"
log "open loop: p99 of the interval holding the pause $OPEN_WINDOW_P99 us, of the run $OPEN_P99 us, max $OPEN_MAX us"
at_least "open loop: p99 of the interval holding the pause (us)" "$OPEN_WINDOW_P99" 400000
at_least "open loop: p99 of the measured window (us)" "$OPEN_P99" 400000
expect_eq "open loop: errors" "$(rj "$R" 'r["steps"][0]["errors"]')" 0

run_with_pause closed --model mini --mode closed --concurrency 1
R="$TMP/closed.json"
# A p99 below the pause needs at least 100 requests in the sample (else the
# one paused request is the p99 whatever rankload does). On a machine busy
# with other work (sanitizer builds, parallel tests) the closed loop can send
# fewer than that in some live intervals: those say nothing about
# under-reporting and are left out (and logged). The measured window as a
# whole must hold enough requests, or the run is too slow to check anything.
CLOSED_WINDOW_P99="$(rj "$R" 'max([i["p99_us"] for i in intervals(0) if i["completed"] >= 200] or [0])')"
CLOSED_THIN="$(rj "$R" 'sum(1 for i in intervals(0) if i["completed"] < 200)')"
CLOSED_COMPLETED="$(rj "$R" 'r["steps"][0]["completed"]')"
log "closed loop: $CLOSED_COMPLETED requests in the window, $CLOSED_THIN interval(s) with fewer than 200 left out of the per-interval check"
at_least "closed loop: requests in the measured window (else too slow to check)" "$CLOSED_COMPLETED" 300
CLOSED_P99="$(rj "$R" 'r["steps"][0]["latency_us"]["p99"]')"
CLOSED_MAX="$(rj "$R" 'r["steps"][0]["latency_us"]["max"]')"
log "closed loop: p99 of the worst interval $CLOSED_WINDOW_P99 us, of the run $CLOSED_P99 us, max $CLOSED_MAX us"
at_least "closed loop: max (the pause happened during the run)" "$CLOSED_MAX" 400000
below "closed loop: p99 of every interval (us)" "$CLOSED_WINDOW_P99" 400000
below "closed loop: p99 of the measured window (us)" "$CLOSED_P99" 100000
below "closed loop p99 x 4 < open loop p99" "$(awk -v x="$CLOSED_P99" 'BEGIN{print 4*x}')" "$OPEN_P99"

stop_rankd
expect_eq "rankd exit status after SIGTERM" "$RANKD_RC" 0
finish
