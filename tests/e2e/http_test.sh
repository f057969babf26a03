#!/bin/bash
# End to end: rankd's HTTP listener (--http_port), called with curl as a
# user would:
#   - POST /v1/models/{m}:score (ScoreRequest JSON, `curl -d @req.json`) and
#     POST /v2/models/{m}/infer (KServe v2 REST JSON tensors) score two
#     models bit-equal to `rankd score` (CPU backend);
#   - live / ready, server and model metadata answer per the KServe REST
#     protocol; its errors (wrong datatype, wrong shape, missing tensor,
#     unknown model) get 400 / 404 with a JSON message naming the problem;
#   - malformed JSON, a wrong content type and oversized bodies (announced
#     or chunked) get 400 / 415 / 413 with a message, and the server keeps
#     serving;
#   - idle and trickling connections do not delay a new one;
#   - rankd_requests_total counts each protocol under its own label.
source "$(dirname "$0")/lib.sh"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
gen_model "$MODELS" kaggle --preset kaggle --scale 0.001
for m in mini kaggle; do
  gen_requests "$MODELS/$m/1" "$TMP/req_$m.jsonl" --count 12 --candidates 33 --seed 31
  gen_requests "$MODELS/$m/1" "$TMP/req_$m.w.jsonl" --count 8 --candidates 4 --bag_size 3 \
    --weighted --seed 32
  cat "$TMP/req_$m.w.jsonl" >>"$TMP/req_$m.jsonl"
  reference_scores "$MODELS/$m/1" "$TMP/req_$m.jsonl" "$TMP/want_$m.jsonl"
done

MAX_BODY=1048576
start_rankd "$MODELS" --max_message_bytes "$MAX_BODY"
[[ "$HTTP_PORT" =~ ^[0-9]+$ && "$HTTP_PORT" -gt 0 ]] || die "no http_port in the port file"
expect_grep "start-up log names the HTTP port" "$RANKD_LOG" "HTTP on 127.0.0.1:$HTTP_PORT \(plaintext\)"
HTTP="http://127.0.0.1:$HTTP_PORT"
check() { "$PY" "$E2E_DIR/http_check.py" "$@"; }

# post URL BODY_FILE OUT [curl args...]: the HTTP status (000: no answer).
post() {
  local url="$1" body="$2" out="$3"
  shift 3
  run_bounded 30 curl -s -o "$out" -w '%{http_code}' --max-time 20 "$@" --data-binary "@$body" \
    "$url"
}
# get PATH OUT: the HTTP status of GET $HTTP/PATH.
get() { run_bounded 30 curl -s -o "$2" -w '%{http_code}' --max-time 20 "$HTTP$1"; }

log "scores through both endpoints"
for m in mini kaggle; do
  dir="$TMP/bodies_$m"
  mkdir -p "$dir"
  n="$(check bodies --input "$TMP/req_$m.jsonl" --dir "$dir")"
  for ((i = 0; i < n; i++)); do
    # The README's example: curl -d @req.json (curl's default content type).
    code="$(run_bounded 30 curl -s -o "$dir/native_$i.out" -w '%{http_code}' --max-time 20 \
      -d "@$dir/native_$i.json" "$HTTP/v1/models/$m:score")"
    [[ "$code" == 200 ]] || fail "$m request $i: /v1 :score answered $code: $(head -c 300 "$dir/native_$i.out")"
    code="$(post "$HTTP/v2/models/$m/infer" "$dir/kserve_$i.json" "$dir/kserve_$i.out" \
      -H 'Content-Type: application/json')"
    [[ "$code" == 200 ]] || fail "$m request $i: /v2 infer answered $code: $(head -c 300 "$dir/kserve_$i.out")"
  done
  for kind in native kserve; do
    check collect --dir "$dir" --kind $kind --count "$n" --output "$TMP/got_${m}_$kind.jsonl" ||
      fail "$m: cannot read the $kind answers"
    compare_scores "$m via HTTP ($kind)" "$TMP/want_$m.jsonl" "$TMP/got_${m}_$kind.jsonl"
  done
done
expect_grep "native answer names model and version" "$TMP/bodies_mini/native_0.out" \
  '"model":"mini","version":"1"'
expect_grep "KServe answer names model, version and id" "$TMP/bodies_mini/kserve_0.out" \
  '^\{"model_name":"mini","model_version":"1","id":"req-33","outputs":\[\{"name":"scores","datatype":"FP32","shape":\[33\]'
expect_eq "/versions/1:score" "$(post "$HTTP/v1/models/mini/versions/1:score" \
  "$TMP/bodies_mini/native_0.json" "$TMP/v1.out")" 200
expect_eq "/versions/1/infer" "$(post "$HTTP/v2/models/mini/versions/1/infer" \
  "$TMP/bodies_mini/kserve_0.json" "$TMP/v2.out")" 200

log "health and metadata"
expect_eq "live" "$(get /v2/health/live "$TMP/live.out")" 200
expect_eq "ready" "$(get /v2/health/ready "$TMP/ready.out")" 200
expect_grep "ready body" "$TMP/ready.out" '^\{"ready":true\}$'
expect_eq "server metadata" "$(get /v2 "$TMP/server.out")" 200
expect_grep "server metadata body" "$TMP/server.out" '"name":"rankd","version":"'
expect_eq "model metadata" "$(get /v2/models/mini "$TMP/meta.out")" 200
expect_grep "metadata: dense [-1, 13]" "$TMP/meta.out" '\{"datatype":"FP32","name":"dense","shape":\[-1,13\]\}'
expect_grep "metadata: lengths" "$TMP/meta.out" '\{"datatype":"INT32","name":"cat_0.lengths","shape":\[-1\]\}'
expect_grep "metadata: output" "$TMP/meta.out" '"outputs":\[\{"datatype":"FP32","name":"scores","shape":\[-1\]\}\]'
expect_grep "metadata: platform, versions" "$TMP/meta.out" '"platform":"rankd_cpu","versions":\["1"\]'
expect_eq "model ready" "$(get /v2/models/mini/versions/1/ready "$TMP/mready.out")" 200
expect_eq "unknown model ready" "$(get /v2/models/nope/ready "$TMP/nready.out")" 404
expect_grep "unknown model named" "$TMP/nready.out" '^\{"error":"model: \\"nope\\" is not served'
expect_eq "unknown version ready" "$(get /v2/models/mini/versions/7/ready "$TMP/v7.out")" 404
expect_grep "unknown version named" "$TMP/v7.out" 'no ready version 7'
expect_eq "unknown path" "$(get /v2/nothing/here "$TMP/nopath.out")" 404
expect_grep "unknown path: JSON error" "$TMP/nopath.out" '^\{"error":"no such endpoint: GET /v2/nothing/here"\}$'

log "KServe protocol errors"
check bad --input "$TMP/req_mini.jsonl" --dir "$TMP" || die "cannot write the bad bodies"
expect_eq "wrong datatype" "$(post "$HTTP/v2/models/mini/infer" "$TMP/bad_datatype.json" "$TMP/e1.out")" 400
expect_grep "wrong datatype named" "$TMP/e1.out" 'input \\"dense\\": datatype \\"INT64\\", expected FP32'
expect_eq "wrong shape" "$(post "$HTTP/v2/models/mini/infer" "$TMP/bad_shape.json" "$TMP/e2.out")" 400
expect_grep "wrong shape named" "$TMP/e2.out" 'input \\"dense\\": shape has 1 dimensions'
expect_eq "missing tensor" "$(post "$HTTP/v2/models/mini/infer" "$TMP/bad_missing.json" "$TMP/e3.out")" 400
expect_grep "missing tensor named" "$TMP/e3.out" 'cat_0.lengths'
expect_eq "unknown model" "$(post "$HTTP/v2/models/nope/infer" "$TMP/bodies_mini/kserve_0.json" "$TMP/e4.out")" 404
expect_grep "unknown model named" "$TMP/e4.out" 'model: \\"nope\\" is not served'

log "malformed JSON, content type, oversized bodies"
printf '{"model": "mini", "numCandidates": ' >"$TMP/truncated.json"
expect_eq "malformed JSON" "$(post "$HTTP/v1/models/mini:score" "$TMP/truncated.json" "$TMP/m1.out")" 400
expect_grep "malformed JSON named" "$TMP/m1.out" 'not a rankd.v1.ScoreRequest in JSON'
printf '{"inputs": [{"name": "dense", "data": [1, 2' >"$TMP/truncated_kserve.json"
expect_eq "malformed KServe JSON" \
  "$(post "$HTTP/v2/models/mini/infer" "$TMP/truncated_kserve.json" "$TMP/m2.out")" 400
expect_grep "malformed KServe JSON named" "$TMP/m2.out" 'not valid JSON \(at byte'
expect_eq "wrong content type" "$(post "$HTTP/v1/models/mini:score" "$TMP/bodies_mini/native_0.json" \
  "$TMP/m3.out" -H 'Content-Type: text/plain')" 415
expect_grep "content type named" "$TMP/m3.out" 'Content-Type \\"text/plain\\" is not supported'
head -c $((2 * MAX_BODY)) /dev/zero | tr '\0' ' ' >"$TMP/big.json"
expect_eq "oversized body" "$(post "$HTTP/v1/models/mini:score" "$TMP/big.json" "$TMP/m4.out")" 413
expect_grep "oversized: the limit named" "$TMP/m4.out" "over the limit of $MAX_BODY bytes"
expect_eq "oversized chunked body" "$(post "$HTTP/v2/models/mini/infer" "$TMP/big.json" "$TMP/m5.out" \
  -H 'Transfer-Encoding: chunked')" 413
expect_grep "oversized chunked: the limit named" "$TMP/m5.out" "over the limit of $MAX_BODY bytes"
expect_eq "still serving after the bad requests" "$(post "$HTTP/v1/models/mini:score" \
  "$TMP/bodies_mini/native_0.json" "$TMP/after.out")" 200

log "idle and trickling connections"
check idle --port "$HTTP_PORT" --idle 40 --slow 40 --within_s 1.0 >"$TMP/idle.out" 2>&1 ||
  fail "a new connection waited behind idle ones: $(cat "$TMP/idle.out")"

scrape "$TMP/metrics.txt"
for m in mini kaggle; do
  extra=0
  [[ "$m" == mini ]] && extra=2  # /versions/1:score and the request after the bad ones
  expect_eq "$m: requests_total{protocol=http,code=OK}" \
    "$(metric_int "$TMP/metrics.txt" rankd_requests_total "model=\"$m\"" 'code="OK"' 'protocol="http"')" \
    $((20 + extra))
  extra=0
  [[ "$m" == mini ]] && extra=1
  expect_eq "$m: requests_total{protocol=kserve_http,code=OK}" \
    "$(metric_int "$TMP/metrics.txt" rankd_requests_total "model=\"$m\"" 'code="OK"' 'protocol="kserve_http"')" \
    $((20 + extra))
done
expect_eq "no rankd-protocol requests counted" \
  "$(grep -c '^rankd_requests_total{.*protocol="rankd"' "$TMP/metrics.txt")" 0

stop_rankd
expect_eq "rankd exit status after SIGTERM" "$RANKD_RC" 0
finish
