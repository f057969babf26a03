#!/bin/bash
# End to end: under concurrent load the dynamic batcher really groups requests,
# and /metrics accounts for every request exactly.
# 200 mini requests through rankctl --concurrency 16 at a model with one
# worker and max_queue_delay_us 2000; then, from /metrics:
#   rankd_batch_requests_bucket{le="1"} < rankd_batch_requests_count
#     (some batch held more than one request);
#   rankd_requests_total{code="OK"} = 200, nothing else counted;
#   batch_requests_sum = 200 + 2 warm-up requests (each request in exactly
#   one batch), batch_candidates_sum = candidates_total = 200 x 64 + 65;
#   batches_total = batch_requests_count; the queue gauges back at 0;
#   rankd_intake_duration_seconds and rankd_answer_duration_seconds count
#   each gRPC request once (200).
# And the 200 responses equal `rankd score`'s, bit-exact.
source "$(dirname "$0")/lib.sh"

N=200
MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
set_model_options "$MODELS/mini/1" \
  "batching { max_queue_delay_us: 2000 } instances { workers_per_device: 1 }"
gen_requests "$MODELS/mini/1" "$TMP/req.jsonl" --count "$N" --candidates 64 --seed 41
reference_scores "$MODELS/mini/1" "$TMP/req.jsonl" "$TMP/want.jsonl"

start_rankd "$MODELS"
rankctl score --input "$TMP/req.jsonl" --output "$TMP/got.jsonl" --concurrency 16 \
  --deadline_ms 30000 2>"$TMP/rankctl.err" || fail "rankctl score: $(tail -3 "$TMP/rankctl.err")"
expect_grep "rankctl summary" "$TMP/rankctl.err" "^rankctl score: $N ok, 0 failed"
compare_scores "batched responses" "$TMP/want.jsonl" "$TMP/got.jsonl"

scrape "$TMP/metrics.txt"
grep -E '^rankd_(batch_requests|requests_total|batches_total|candidates_total)' "$TMP/metrics.txt" |
  grep 'model="mini"' >&2
M() { metric_int "$TMP/metrics.txt" "$@" 'model="mini"'; }
LE1="$(M rankd_batch_requests_bucket 'le="1"')"
COUNT="$(M rankd_batch_requests_count)"
[[ -n "$LE1" && -n "$COUNT" ]] || fail "no rankd_batch_requests histogram for mini"
[[ -n "$LE1" && -n "$COUNT" && "$LE1" -lt "$COUNT" ]] ||
  fail "no batch held more than one request: bucket{le=1} $LE1, count $COUNT"
log "batches: $COUNT, of one request: $LE1"
expect_eq "rankd_requests_total{code=OK}" "$(M rankd_requests_total 'code="OK"')" "$N"
expect_eq "rankd_requests_total samples for mini (only code OK)" \
  "$(grep -c '^rankd_requests_total{.*model="mini"' "$TMP/metrics.txt")" 1
expect_eq "rankd_batch_requests_sum" "$(M rankd_batch_requests_sum)" $((N + 2))
expect_eq "rankd_batch_candidates_sum" "$(M rankd_batch_candidates_sum)" $((N * 64 + 65))
expect_eq "rankd_candidates_total" "$(M rankd_candidates_total)" $((N * 64 + 65))
expect_eq "rankd_batches_total" "$(M rankd_batches_total)" "$COUNT"
expect_eq "rankd_request_duration_seconds_count" "$(M rankd_request_duration_seconds_count 'version="1"')" "$N"
expect_eq "rankd_intake_duration_seconds_count" "$(M rankd_intake_duration_seconds_count)" "$N"
expect_eq "rankd_answer_duration_seconds_count" "$(M rankd_answer_duration_seconds_count)" "$N"
expect_eq "rankd_queue_requests" "$(M rankd_queue_requests)" 0
expect_eq "rankd_queue_candidates" "$(M rankd_queue_candidates)" 0
expect_eq "rankd_model_ready" "$(metric_int "$TMP/metrics.txt" rankd_model_ready 'model="mini"' 'version="1"')" 1

stop_rankd
expect_eq "rankd exit status after SIGTERM" "$RANKD_RC" 0
finish
