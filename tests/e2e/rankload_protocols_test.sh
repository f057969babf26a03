#!/bin/bash
# End to end: rankload --protocol rankd | kserve | http sends the same
# replayed requests through each of rankd's three scoring front ends, and
# every call is counted alike on both sides. The file holds 60 mini requests
# (4 candidates), 3 for a model the server does not have (NOT_FOUND) and 2
# naming a sparse feature the model lacks (INVALID_ARGUMENT, from the
# validation every front end shares). At 500 req/s for 0.5 s warm-up + 1 s,
# one sender thread sends exactly 750 requests per protocol, round-robin over
# the 65 lines, so the counts by code are known; rankd's
# rankd_requests_total{protocol=...} must move by exactly those, and
# rankd_candidates_total by 4 x OK. A request KServe cannot carry (a version
# label) is refused before the run, naming the request.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/rankload_lib.sh"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
mixed_requests "$MODELS/mini/1" 's/"name":"cat_0"/"name":"cat_zz"/'
expect_eq "NOT_FOUND lines" "$(grep -c '"model":"nope"' "$TMP/mixed.jsonl")" 3
expect_eq "INVALID_ARGUMENT lines" "$(grep -c '"name":"cat_zz"' "$TMP/mixed.jsonl")" 2

start_rankd "$MODELS"

# Request i (0-based) is line i % 65; 750 sent in all.
read -r T_OK T_NF T_IA < <("$PY" -c '
c = [0, 0, 0]
for i in range(750):
    k = i % 65
    c[0 if k < 60 else 1 if k < 63 else 2] += 1
print(*c)')
log "expected per protocol: OK $T_OK NOT_FOUND $T_NF INVALID_ARGUMENT $T_IA"

for protocol in rankd kserve http; do
  scrape "$TMP/before_$protocol.txt"
  R="$TMP/report_$protocol.json"
  rankload --protocol "$protocol" --http_target "127.0.0.1:$HTTP_PORT" --http_connections 4 \
    --requests "$TMP/mixed.jsonl" --rate 500 --warmup_s 0.5 --duration_s 1 --threads 1 \
    --connections 2 --json "$R" >"$TMP/report_$protocol.txt" 2>"$TMP/live_$protocol.txt"
  expect_eq "$protocol: rankload exit code" "$?" 0
  scrape "$TMP/after_$protocol.txt"
  expect_eq "$protocol: report's protocol" "$(rj "$R" 'r["settings"]["protocol"]')" "$protocol"
  expect_eq "$protocol: answered" "$(rj "$R" 'sum(r["steps"][0]["total_by_code"].values())')" 750
  for code in OK NOT_FOUND INVALID_ARGUMENT; do
    case $code in OK) want=$T_OK label='model="mini"' ;; NOT_FOUND) want=$T_NF label='model=""' ;;
      INVALID_ARGUMENT) want=$T_IA label='model="mini"' ;; esac
    before="$(metric_int "$TMP/before_$protocol.txt" rankd_requests_total "$label" "code=\"$code\"" \
      "protocol=\"$protocol\"")"
    after="$(metric_int "$TMP/after_$protocol.txt" rankd_requests_total "$label" "code=\"$code\"" \
      "protocol=\"$protocol\"")"
    expect_eq "$protocol $code: rankload's count" \
      "$(rj "$R" "r['steps'][0]['total_by_code'].get('$code')")" "$want"
    expect_eq "$protocol $code: rankd_requests_total delta" "$(( ${after:-0} - ${before:-0} ))" "$want"
  done
  expect_eq "$protocol: other codes" "$(rj "$R" 'sorted(r["steps"][0]["total_by_code"])')" \
    "['INVALID_ARGUMENT', 'NOT_FOUND', 'OK']"
  C0="$(metric_int "$TMP/before_$protocol.txt" rankd_candidates_total 'model="mini"')"
  C1="$(metric_int "$TMP/after_$protocol.txt" rankd_candidates_total 'model="mini"')"
  expect_eq "$protocol: rankd_candidates_total delta = 4 x OK" "$((C1 - C0))" "$((4 * T_OK))"
done
expect_grep "text report names the protocol" "$TMP/report_http.txt" "127.0.0.1:$HTTP_PORT \(http, 4 connections"

# KServe has no version labels: refused before any call, naming the request.
sed 's/"model":"mini"/"model":"mini","versionLabel":"canary"/' "$TMP/good.jsonl" >"$TMP/label.jsonl"
rankload --protocol kserve --requests "$TMP/label.jsonl" --rate 10 --duration_s 1 \
  >"$TMP/label.txt" 2>&1
expect_eq "kserve with a version label: usage exit" "$?" 2
expect_grep "kserve with a version label: message" "$TMP/label.txt" \
  "--protocol kserve: request 0 as KServe tensors: version_label"

finish
