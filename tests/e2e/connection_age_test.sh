#!/bin/bash
# End to end (issue 17, "Connections"): client connections of the public
# port are recycled after --max_connection_age_s without failing the RPCs
# in flight on them, so clients reach replicas added behind a load balancer;
# and keepalive is enforced.
#   1. Every Score call takes ~1.5 s (the model's batcher waits
#      max_queue_delay_us for a batch to fill); one client calls back to back
#      for 9 s over one channel with --max_connection_age_s 2 (grace 10 s):
#      every call succeeds, including those in flight when the GOAWAY came,
#      and the client used at least 2 TCP connections (the server recycled
#      the first). Without the setting the client keeps one connection and
#      the test fails.
#   2. Keepalive enforcement, with --keepalive_min_client_interval_s 1: a raw
#      HTTP/2 client pinging every 2 s without any RPC keeps its connection
#      (gRPC's defaults, 5 min and no pings without calls, would close it),
#      one pinging every 100 ms is sent GOAWAY too_many_pings and closed.
source "$(dirname "$0")/lib.sh"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
set_model_options "$MODELS/mini/1" \
  "batching { max_queue_delay_us: 1500000 max_batch_candidates: 4096 }"
NUM_DENSE="$(sed -n 's/^num_dense: *//p' "$MODELS/mini/1/model.pbtxt")"
FEATURES="$(model_features "$MODELS/mini/1")"
hostile() { run_bounded 120 "$PY" "$E2E_DIR/hostile_client.py" "$@"; }

start_rankd "$MODELS" --backend cpu --max_connection_age_s 2 --max_connection_age_grace_s 10
hostile conn-age --target "$TARGET" --model mini --num_dense "$NUM_DENSE" --features "$FEATURES" \
  --slow_s 1.5 --run_s 9 || fail "connection age (above)"
scrape "$TMP/m.txt"
for code in CANCELLED UNAVAILABLE INTERNAL; do
  n="$(metric_int "$TMP/m.txt" rankd_requests_total 'model="mini"' "code=\"$code\"")"
  [[ -z "$n" || "$n" -eq 0 ]] || fail "$n requests answered $code while connections were recycled"
done
stop_rankd TERM
expect_eq "rankd exit status" "$RANKD_RC" 0

start_rankd "$MODELS" --backend cpu --keepalive_min_client_interval_s 1
hostile ping-flood --target "$TARGET" --wait_s 5 || fail "keepalive enforcement (above)"
stop_rankd TERM
expect_eq "rankd exit status" "$RANKD_RC" 0
finish
