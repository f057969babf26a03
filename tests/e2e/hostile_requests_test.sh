#!/bin/bash
# End to end (issue 17, defects 5 and 6): requests a careless or hostile
# client can send, against the real `rankd serve`, through a default gRPC
# client (4 MiB receive limit, 8 KiB of metadata) that sends raw bytes
# (tests/e2e/hostile_client.py).
# Defect 5, client text echoed into errors: model names of 8 and 60 MiB
# (Score and GetModelInfo), a feature name and a version label of 8 MiB, a
# 1 MiB non-ASCII name: each is answered within 10 s with NOT_FOUND /
# INVALID_ARGUMENT and a message under 1100 bytes (the name cut to 128 bytes
# plus its size). A 70 MiB name, past --max_message_bytes, gets gRPC's own
# RESOURCE_EXHAUSTED at once. Before the fix the message quoted the whole
# name: from ~8 KiB a default client could not read it, and a 60 MiB name
# was never answered.
# Defect 6, bytes that are not a ScoreRequest: INVALID_ARGUMENT "request is
# not a valid rankd.v1.ScoreRequest", counted in rankd_requests_total
# (model="", code INVALID_ARGUMENT) and rankd_requests_refused_total
# {reason="malformed"}. Before the fix gRPC answered UNIMPLEMENTED with no
# message and nothing counted them.
source "$(dirname "$0")/lib.sh"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
NUM_DENSE="$(sed -n 's/^num_dense: *//p' "$MODELS/mini/1/model.pbtxt")"
FEATURES="$(model_features "$MODELS/mini/1")"
[[ -n "$NUM_DENSE" && -n "$FEATURES" ]] || die "cannot read mini's config: $(head -c 600 "$MODELS/mini/1/model.pbtxt")"

start_rankd "$MODELS" --backend cpu
hostile() { run_bounded 300 "$PY" "$E2E_DIR/hostile_client.py" "$@"; }

scrape "$TMP/m0.txt"
hostile huge-names --target "$TARGET" --model mini --num_dense "$NUM_DENSE" --features "$FEATURES" ||
  fail "huge names (above)"
kill -0 "$RANKD_PID" 2>/dev/null || die "rankd died on huge names"
# The log quotes no client text whole either: no line near the name's size.
LONGEST_LINE="$(awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' "$RANKD_LOG")"
[[ "$LONGEST_LINE" -lt 4096 ]] || fail "a log line of $LONGEST_LINE bytes"

scrape "$TMP/m1.txt"
hostile malformed --target "$TARGET" || fail "malformed requests (above)"
scrape "$TMP/m2.txt"
BEFORE="$(metric_int "$TMP/m1.txt" rankd_requests_total 'model=""' 'code="INVALID_ARGUMENT"')"
AFTER="$(metric_int "$TMP/m2.txt" rankd_requests_total 'model=""' 'code="INVALID_ARGUMENT"')"
expect_eq "malformed Score requests in rankd_requests_total{model=\"\",code=INVALID_ARGUMENT}" \
  "$(( ${AFTER:-0} - ${BEFORE:-0} ))" 4
expect_eq "rankd_requests_refused_total{reason=malformed}" \
  "$(metric_int "$TMP/m2.txt" rankd_requests_refused_total 'reason="malformed"')" 4
# The huge model names counted under model="" (bounded labels), NOT_FOUND.
NF="$(metric_int "$TMP/m1.txt" rankd_requests_total 'model=""' 'code="NOT_FOUND"')"
[[ -n "$NF" && "$NF" -ge 3 ]] || fail "unknown huge model names not counted under model=\"\": '$NF'"

# A client repeating a request whose string is not UTF-8 gets INVALID_ARGUMENT
# each time; protobuf's log line about it reaches the log once per 10 s, not
# once per request (server/protobuf_log.h).
hostile utf8-flood --target "$TARGET" --count 200 || fail "UTF-8 flood (above)"
UTF8_LINES="$(grep -c 'invalid UTF-8' "$RANKD_LOG")"
[[ "$UTF8_LINES" -ge 1 && "$UTF8_LINES" -le 2 ]] ||
  fail "protobuf's invalid UTF-8 line logged $UTF8_LINES times for 201 such requests (want 1 or 2)"

stop_rankd TERM
expect_eq "rankd exit status" "$RANKD_RC" 0
finish
