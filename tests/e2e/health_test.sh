#!/bin/bash
# End to end: grpc.health.v1 on the real rankd. SERVING for the server ("")
# and for each model's name; SERVICE_UNKNOWN (NOT_FOUND in the protocol) for
# a name it does not serve; NOT_SERVING-or-gone once it is told to stop.
source "$(dirname "$0")/lib.sh"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
gen_model "$MODELS" mini_dyn --preset mini --dynamic_tables 1 --dtype bf16
gen_model "$MODELS" kaggle --preset kaggle --scale 0.001

start_rankd "$MODELS"

# health_is NAME WANT_STATUS WANT_RC [--service S]
health_is() {
  local name="$1" want="$2" want_rc="$3"
  shift 3
  rankctl health "$@" >"$TMP/health.out" 2>"$TMP/health.err"
  local rc=$?
  expect_eq "$name: status" "$(cat "$TMP/health.out")" "$want"
  expect_eq "$name: exit code" "$rc" "$want_rc"
}

health_is 'server ""' SERVING 0
health_is 'server "" (explicit)' SERVING 0 --service ""
for m in mini mini_dyn kaggle; do
  health_is "model $m" SERVING 0 --service "$m"
done
health_is "unknown service" SERVICE_UNKNOWN 1 --service no_such_model
health_is "a model's name with a version is not a service" SERVICE_UNKNOWN 1 --service mini/1
health_is "the Ranking service name is not a model" SERVICE_UNKNOWN 1 --service rankd.v1.Ranking

# The Python client agrees.
PYTHONPATH="$PY_CLIENT_PATH" run_bounded 60 "$PY" - "$TARGET" >"$TMP/py_health.out" 2>&1 <<'PYEOF'
import sys
from rankd_client import RankingClient
with RankingClient(sys.argv[1], timeout_s=5) as c:
    for s in ["", "mini", "mini_dyn", "kaggle", "no_such_model"]:
        print("%s=%s" % (s, c.health(s)))
PYEOF
expect_eq "Python client health" "$(tr '\n' ' ' <"$TMP/py_health.out")" \
  "=SERVING mini=SERVING mini_dyn=SERVING kaggle=SERVING no_such_model=SERVICE_UNKNOWN "

stop_rankd
expect_eq "rankd exit status after SIGTERM" "$RANKD_RC" 0
expect_grep "drain logged" "$RANKD_LOG" 'SIGTERM received'
# Gone: health now fails with UNAVAILABLE (exit 3).
run_bounded 30 "$RANKCTL" health --target "$TARGET" >/dev/null 2>"$TMP/health.err"
expect_eq "health after exit: exit code" "$?" 3
finish
