#!/bin/bash
# End to end: rankload's request and error counts agree with rankd's /metrics.
# The replayed file holds 60 mini requests (4 candidates), 3 for a model the
# server does not have (NOT_FOUND, counted by rankd under model="") and 2 with
# one candidate too many for their dense features (INVALID_ARGUMENT). One
# sender thread at 500 req/s constant for 0.5 s warm-up + 2 s sends exactly
# 1250 requests, round-robin over the 65 lines, so every count is known:
#   per gRPC code, rankload's totals (warm-up included) = the difference of
#   rankd_requests_total between a scrape before and one after (taken by this
#   test with curl) = rankload's own server-side figures (--metrics_url);
#   the measured window's counts by code; rankd_candidates_total = 4 x OK.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/rankload_lib.sh"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
mixed_requests "$MODELS/mini/1" 's/"numCandidates":4/"numCandidates":5/'
expect_eq "mixed request lines" "$(wc -l <"$TMP/mixed.jsonl")" 65
expect_eq "NOT_FOUND lines" "$(grep -c '"model":"nope"' "$TMP/mixed.jsonl")" 3
expect_eq "INVALID_ARGUMENT lines" "$(grep -c '"numCandidates":5' "$TMP/mixed.jsonl")" 2

start_rankd "$MODELS"
scrape "$TMP/before.txt"
rankload --requests "$TMP/mixed.jsonl" --rate 500 --warmup_s 0.5 --duration_s 2 --threads 1 \
  --connections 2 --metrics_url "http://127.0.0.1:$METRICS_PORT/metrics" \
  --json "$TMP/report.json" >"$TMP/report.txt" 2>"$TMP/live.txt"
expect_eq "rankload exit code" "$?" 0
cat "$TMP/report.txt" >&2
scrape "$TMP/after.txt"

# Expected counts: request i (0-based, sent at i / 500 s) is line i % 65.
read -r W_OK W_NF W_IA T_OK T_NF T_IA < <("$PY" -c '
total, first = 1250, 250  # the window holds requests 250 .. 1249
def counts(lo):
    c = [0, 0, 0]
    for i in range(lo, total):
        k = i % 65
        c[0 if k < 60 else 1 if k < 63 else 2] += 1
    return c
print(*counts(first), *counts(0))')
log "expected: window OK $W_OK NOT_FOUND $W_NF INVALID_ARGUMENT $W_IA; total OK $T_OK NOT_FOUND $T_NF INVALID_ARGUMENT $T_IA"

R="$TMP/report.json"
expect_eq "rankload sent (window)" "$(rj "$R" 'r["steps"][0]["sent"]')" 1000
expect_eq "rankload answered (window)" "$(rj "$R" 'r["steps"][0]["completed"]')" 1000
expect_eq "rankload OK (window)" "$(rj "$R" 'r["steps"][0]["ok"]')" "$W_OK"
expect_eq "rankload NOT_FOUND (window)" "$(rj "$R" 'r["steps"][0]["errors_by_code"].get("NOT_FOUND")')" "$W_NF"
expect_eq "rankload INVALID_ARGUMENT (window)" \
  "$(rj "$R" 'r["steps"][0]["errors_by_code"].get("INVALID_ARGUMENT")')" "$W_IA"
expect_eq "rankload error codes (window)" "$(rj "$R" 'sorted(r["steps"][0]["errors_by_code"])')" \
  "['INVALID_ARGUMENT', 'NOT_FOUND']"
for code in OK NOT_FOUND INVALID_ARGUMENT; do
  case $code in OK) want=$T_OK label='model="mini"' ;; NOT_FOUND) want=$T_NF label='model=""' ;;
    INVALID_ARGUMENT) want=$T_IA label='model="mini"' ;; esac
  before="$(metric_int "$TMP/before.txt" rankd_requests_total "$label" "code=\"$code\"")"
  after="$(metric_int "$TMP/after.txt" rankd_requests_total "$label" "code=\"$code\"")"
  server=$(( ${after:-0} - ${before:-0} ))
  client="$(rj "$R" "r['steps'][0]['total_by_code'].get('$code')")"
  own="$(rj "$R" "r['steps'][0]['server_total']['requests_by_code'].get('$code')")"
  log "$code: rankload $client, rankd /metrics delta $server, rankload's own scrape $own, expected $want"
  expect_eq "$code: rankload total" "$client" "$want"
  expect_eq "$code: rankd_requests_total delta" "$server" "$want"
  expect_eq "$code: rankload's server-side count" "$own" "$want"
done
expect_eq "rankd_requests_total codes for mini after the run" \
  "$(grep -E '^rankd_requests_total\{' "$TMP/after.txt" | grep -c 'model="mini"')" 2
C0="$(metric_int "$TMP/before.txt" rankd_candidates_total 'model="mini"')"
C1="$(metric_int "$TMP/after.txt" rankd_candidates_total 'model="mini"')"
expect_eq "rankd_candidates_total delta = 4 x OK" "$((C1 - C0))" "$((4 * T_OK))"
expect_eq "rankload's server-side candidates" "$(rj "$R" 'r["steps"][0]["server_total"]["candidates"]')" \
  "$((4 * T_OK))"
# The text report shows the server's view too.
expect_grep "report: server line" "$TMP/report.txt" '^  server     [0-9]+ requests \('
expect_grep "report: errors line" "$TMP/report.txt" "^  errors     INVALID_ARGUMENT $W_IA, NOT_FOUND $W_NF$"

stop_rankd
expect_eq "rankd exit status after SIGTERM" "$RANKD_RC" 0
finish
