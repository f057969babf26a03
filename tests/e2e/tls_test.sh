#!/bin/bash
# End to end: TLS, mTLS, certificate rotation and admin authentication on the
# real rankd, with certificates this test makes (openssl):
#   TLS: a client trusting the CA scores and checks health; plaintext and a
#        client trusting another CA are refused.
#   admin: without --admin_token_file's token (or with a wrong one) every
#        admin call is UNAUTHENTICATED; with it, it works.
#   mTLS: a client without a certificate is refused, one with a certificate
#        of the client CA works; the plaintext health port (--health_port,
#        for Kubernetes' gRPC probes, which present no certificate) answers
#        grpc.health.v1 and nothing else.
#   rotation: a new certificate written over the files is served to new
#        connections within --tls_reload_s, without a restart.
#   HTTPS: the HTTP listener serves the same certificate (TLS, rotation,
#        mTLS) with curl; plaintext HTTP and other CAs are refused.
#   client CA rotation: a new client CA bundle written over --tls_client_ca_file
#        admits its clients and refuses the old CA's, on the gRPC and the
#        HTTPS port, without a restart.
source "$(dirname "$0")/lib.sh"

PKI="$TMP/pki"
mkdir -p "$PKI"
ossl() { openssl "$@" >>"$TMP/openssl.log" 2>&1 || die "openssl $*: $(tail -5 "$TMP/openssl.log")"; }
# make_ca NAME
make_ca() {
  ossl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$1" \
    -keyout "$PKI/$1.key" -out "$PKI/$1.crt"
}
# make_cert NAME CA EXT: a certificate for NAME signed by CA, with extensions EXT
make_cert() {
  ossl req -newkey rsa:2048 -nodes -subj "/CN=$1" -keyout "$PKI/$1.key" -out "$PKI/$1.csr"
  printf '%s\n' "$3" >"$PKI/$1.ext"
  ossl x509 -req -in "$PKI/$1.csr" -CA "$PKI/$2.crt" -CAkey "$PKI/$2.key" -CAcreateserial \
    -days 2 -extfile "$PKI/$1.ext" -out "$PKI/$1.crt"
}
SERVER_EXT="subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth"
CLIENT_EXT="extendedKeyUsage=clientAuth"
make_ca ca
make_ca other_ca
make_cert server ca "$SERVER_EXT"
make_cert client ca "$CLIENT_EXT"
make_cert rogue other_ca "$CLIENT_EXT"
echo "admin-token-$RANDOM$RANDOM" >"$PKI/token"
echo "not-the-token" >"$PKI/wrong_token"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
gen_requests "$MODELS/mini/1" "$TMP/req.jsonl" --count 3
# The served copies of the server's files (rotation overwrites them).
cp "$PKI/server.crt" "$PKI/served.crt"
cp "$PKI/server.key" "$PKI/served.key"

# health_rc ARGS...: exit code of `rankctl health` with ARGS (output in $TMP/h.out):
# 0 SERVING, 3 UNAVAILABLE (what a failed TLS handshake is to a client).
health_rc() {
  run_bounded 30 "$RANKCTL" health --connect_timeout_ms 3000 --deadline_ms 3000 "$@" \
    >"$TMP/h.out" 2>&1
  echo $?
}
# admin_models ARGS...: `rankctl models` on the admin listener (output in $TMP/a.out).
admin_models() {
  run_bounded 30 "$RANKCTL" models --admin_target "$ADMIN_TARGET" --connect_timeout_ms 3000 \
    "$@" >"$TMP/a.out" 2>&1
  echo $?
}

log "TLS with an admin token"
start_rankd "$MODELS" --admin_port 0 --tls_cert_file "$PKI/served.crt" \
  --tls_key_file "$PKI/served.key" --tls_reload_s 1 --admin_token_file "$PKI/token" \
  --metrics_host 127.0.0.1
expect_grep "start-up log names TLS" "$RANKD_LOG" "\(gRPC, TLS\);.* admin API on .* \(token\)"
expect_grep "metrics bound to loopback" "$RANKD_LOG" "metrics on http://127.0.0.1:"
expect_eq "TLS health with the CA" "$(health_rc --target "$TARGET" --tls_ca_file "$PKI/ca.crt")" 0
expect_grep "SERVING over TLS" "$TMP/h.out" "^SERVING$"
expect_eq "plaintext client refused" "$(health_rc --target "$TARGET")" 3
expect_eq "client trusting another CA refused" \
  "$(health_rc --target "$TARGET" --tls_ca_file "$PKI/other_ca.crt")" 3
run_bounded 60 "$RANKCTL" score --target "$TARGET" --tls_ca_file "$PKI/ca.crt" \
  --input "$TMP/req.jsonl" >"$TMP/scores.out" 2>"$TMP/scores.err"
expect_eq "score over TLS" "$?" 0
expect_eq "three answers over TLS" "$(grep -c '"scores"' "$TMP/scores.out")" 3

admin_models --tls_ca_file "$PKI/ca.crt" >/dev/null
expect_grep "admin call without a token" "$TMP/a.out" "UNAUTHENTICATED"
admin_models --tls_ca_file "$PKI/ca.crt" --token_file "$PKI/wrong_token" >/dev/null
expect_grep "admin call with a wrong token" "$TMP/a.out" "UNAUTHENTICATED"
expect_eq "admin call with the token" \
  "$(admin_models --tls_ca_file "$PKI/ca.crt" --token_file "$PKI/token")" 0
expect_grep "admin answer lists the model" "$TMP/a.out" "mini"

# The HTTP listener serves HTTPS with the same files.
# https_code CURL_ARGS... URL: the HTTP status (000: no answer, e.g. a refused handshake).
https_code() { run_bounded 30 curl -s -o "$TMP/https.out" -w '%{http_code}' --max-time 5 "$@"; }
HTTPS="https://127.0.0.1:$HTTP_PORT"
expect_grep "start-up log: HTTPS" "$RANKD_LOG" "HTTP on 127.0.0.1:$HTTP_PORT \(HTTPS\)"
expect_eq "HTTPS with the CA" "$(https_code --cacert "$PKI/ca.crt" "$HTTPS/v2/health/live")" 200
expect_eq "plaintext HTTP refused" "$(https_code "http://127.0.0.1:$HTTP_PORT/v2/health/live")" 000
expect_eq "HTTPS client trusting another CA refused" \
  "$(https_code --cacert "$PKI/other_ca.crt" "$HTTPS/v2/health/live")" 000
head -1 "$TMP/req.jsonl" >"$TMP/one.json"
expect_eq "score over HTTPS" "$(https_code --cacert "$PKI/ca.crt" -d "@$TMP/one.json" \
  "$HTTPS/v1/models/mini:score")" 200
expect_grep "HTTPS scores" "$TMP/https.out" '"scores":\['

log "rotation: a certificate of another CA written over the served files"
make_cert server2 other_ca "$SERVER_EXT"
cp "$PKI/server2.key" "$PKI/served.key.new" && cp "$PKI/server2.crt" "$PKI/served.crt.new"
mv "$PKI/served.key.new" "$PKI/served.key" && mv "$PKI/served.crt.new" "$PKI/served.crt"
rotated=1
for ((i = 0; i < 30; i++)); do
  rotated="$(health_rc --target "$TARGET" --tls_ca_file "$PKI/other_ca.crt")"
  [[ "$rotated" == 0 ]] && break
  sleep 0.5
done
expect_eq "new certificate served without a restart" "$rotated" 0
rotated=000
for ((i = 0; i < 30; i++)); do
  rotated="$(https_code --cacert "$PKI/other_ca.crt" "$HTTPS/v2/health/live")"
  [[ "$rotated" == 200 ]] && break
  sleep 0.5
done
expect_eq "HTTPS: new certificate served without a restart" "$rotated" 200
expect_eq "old CA no longer matches" "$(health_rc --target "$TARGET" --tls_ca_file "$PKI/ca.crt")" 3
stop_rankd
expect_eq "clean exit" "$RANKD_RC" 0

log "mTLS with a plaintext health port"
# The served copy of the client CA bundle (CA rotation overwrites it).
cp "$PKI/ca.crt" "$PKI/served_client_ca.crt"
start_rankd "$MODELS" --admin_port 0 --tls_cert_file "$PKI/server.crt" \
  --tls_key_file "$PKI/server.key" --tls_client_ca_file "$PKI/served_client_ca.crt" \
  --tls_reload_s 1 --health_port 0
expect_grep "start-up log names mTLS" "$RANKD_LOG" "\(gRPC, mTLS\).*plaintext health on"
CLIENT=(--tls_ca_file "$PKI/ca.crt" --tls_cert_file "$PKI/client.crt" --tls_key_file "$PKI/client.key")
expect_eq "mTLS client without a certificate refused" \
  "$(health_rc --target "$TARGET" --tls_ca_file "$PKI/ca.crt")" 3
expect_eq "mTLS client with a certificate of another CA refused" \
  "$(health_rc --target "$TARGET" --tls_ca_file "$PKI/ca.crt" --tls_cert_file "$PKI/rogue.crt" \
    --tls_key_file "$PKI/rogue.key")" 3
expect_eq "mTLS client with its certificate" "$(health_rc --target "$TARGET" "${CLIENT[@]}")" 0
HTTPS="https://127.0.0.1:$HTTP_PORT"
expect_eq "HTTPS mTLS without a client certificate refused" \
  "$(https_code --cacert "$PKI/ca.crt" "$HTTPS/v2/health/live")" 000
expect_eq "HTTPS mTLS with a certificate of another CA refused" \
  "$(https_code --cacert "$PKI/ca.crt" --cert "$PKI/rogue.crt" --key "$PKI/rogue.key" \
    "$HTTPS/v2/health/live")" 000
expect_eq "HTTPS mTLS with its certificate" "$(https_code --cacert "$PKI/ca.crt" \
  --cert "$PKI/client.crt" --key "$PKI/client.key" "$HTTPS/v2/health/live")" 200
expect_eq "admin over mTLS with a client certificate" "$(admin_models "${CLIENT[@]}")" 0
expect_eq "admin over mTLS without one refused" "$(admin_models --tls_ca_file "$PKI/ca.crt")" 3
[[ "$HEALTH_PORT" =~ ^[0-9]+$ && "$HEALTH_PORT" -gt 0 ]] || die "no health_port in the port file"
expect_eq "plaintext health port answers (Kubernetes probe)" \
  "$(health_rc --target "127.0.0.1:$HEALTH_PORT")" 0
expect_grep "health port: SERVING" "$TMP/h.out" "^SERVING$"
run_bounded 60 "$RANKCTL" score --target "127.0.0.1:$HEALTH_PORT" \
  --input "$TMP/req.jsonl" --connect_timeout_ms 3000 >"$TMP/hp.out" 2>"$TMP/hp.err"
expect_grep "health port serves nothing else" "$TMP/hp.err" "UNIMPLEMENTED"

# The Python client speaks mTLS too.
PYTHONPATH="$PY_CLIENT_PATH" run_bounded 60 "$PY" - "$TARGET" "$PKI" \
  >"$TMP/py.out" 2>&1 <<'PYEOF'
import sys
from rankd_client import RankingClient
target, pki = sys.argv[1], sys.argv[2]
with RankingClient(target, timeout_s=5, tls_ca_file=pki + "/ca.crt",
                   tls_cert_file=pki + "/client.crt", tls_key_file=pki + "/client.key") as c:
    print("python:", c.health(""))
PYEOF
expect_grep "Python client over mTLS" "$TMP/py.out" "python: SERVING"

log "client CA rotation: other_ca's bundle written over the served client CA file"
cp "$PKI/other_ca.crt" "$PKI/served_client_ca.crt.new"
mv "$PKI/served_client_ca.crt.new" "$PKI/served_client_ca.crt"
ROGUE=(--cert "$PKI/rogue.crt" --key "$PKI/rogue.key")
rotated=000
for _ in $(seq 1 40); do
  rotated="$(https_code --cacert "$PKI/ca.crt" "${ROGUE[@]}" "$HTTPS/v2/health/live")"
  [[ "$rotated" == 200 ]] && break
  sleep 0.25
done
expect_eq "HTTPS mTLS: a client of the new CA accepted without a restart" "$rotated" 200
expect_eq "HTTPS mTLS: a client of the old CA refused after the rotation" \
  "$(https_code --cacert "$PKI/ca.crt" --cert "$PKI/client.crt" --key "$PKI/client.key" \
    "$HTTPS/v2/health/live")" 000
rotated=3
for _ in $(seq 1 40); do
  rotated="$(health_rc --target "$TARGET" --tls_ca_file "$PKI/ca.crt" \
    --tls_cert_file "$PKI/rogue.crt" --tls_key_file "$PKI/rogue.key")"
  [[ "$rotated" == 0 ]] && break
  sleep 0.25
done
expect_eq "gRPC mTLS: a client of the new CA accepted without a restart" "$rotated" 0
expect_eq "gRPC mTLS: a client of the old CA refused after the rotation" \
  "$(health_rc --target "$TARGET" "${CLIENT[@]}")" 3
stop_rankd
expect_eq "clean exit" "$RANKD_RC" 0

log "bad TLS flags fail the start, naming the flag"
run_bounded 30 "$RANKD" serve --model_root "$MODELS" --grpc_port 0 --metrics_port -1 \
  --admin_port -1 --http_port -1 --tls_cert_file "$PKI/server.crt" --tls_key_file "$PKI/client.key" \
  >"$TMP/bad.log" 2>&1
expect_eq "mismatched key: exit 2" "$?" 2
expect_grep "mismatched key named" "$TMP/bad.log" "--tls_key_file: .*is not the private key"
finish
