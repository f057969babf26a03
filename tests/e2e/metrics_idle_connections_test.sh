#!/bin/bash
# End to end (issue 17, defect 7): idle and half-open connections to the
# metrics port cannot starve scrapes. Before the fix the exposer had 2
# threads and civetweb's 30 s request timeout: two idle connections blocked
# every scrape for ~30 s.
#   1. 6 connections (3 idle, 3 that sent half a request line and stopped),
#      fewer than --metrics_threads (8): a scrape answers within 2 s.
#   2. 20 such connections, more than the threads: each holds a thread for
#      at most --metrics_request_timeout_ms (2 s), so the scrape answers
#      within 3 rounds of it (8 s), not 30 s or never.
#   3. Prometheus-style scraping goes on working once they are gone.
source "$(dirname "$0")/lib.sh"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
start_rankd "$MODELS" --backend cpu
hostile() { run_bounded 120 "$PY" "$E2E_DIR/hostile_client.py" "$@"; }

hostile idle-metrics --port "$METRICS_PORT" --idle 6 --within 2 ||
  fail "a scrape waited behind 6 idle connections"
hostile idle-metrics --port "$METRICS_PORT" --idle 20 --within 8 ||
  fail "a scrape waited behind 20 idle connections for more than 8 s"
scrape "$TMP/m.txt"
expect_grep "scrape after the idle connections" "$TMP/m.txt" '^rankd_build_info\{'
grep -q "CivetServer\|civetweb" "$RANKD_LOG" && fail "civetweb complained: $(grep -m1 -i civet "$RANKD_LOG")"
stop_rankd TERM
expect_eq "rankd exit status" "$RANKD_RC" 0
finish
