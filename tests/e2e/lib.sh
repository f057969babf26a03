# Shared helpers of the end-to-end tests (tests/e2e/*_test.sh): start the real
# `rankd serve` on loopback with free ports, wait for it, stop it, scrape its
# /metrics, assert. Source it first thing:
#
#   source "$(dirname "$0")/lib.sh"
#
# Everything listens on 127.0.0.1 only. Every wait is bounded; an EXIT trap
# kills the server (and anything registered with track_pid) whatever happens.
set -u

if [[ -n "${TEST_SRCDIR:-}" ]]; then
  E2E_ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"  # bazel test: the runfiles tree
else
  # By hand, after `bazel build //server:rankd //client:rankctl`, from the checkout.
  E2E_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
fi
if [[ -x "$E2E_ROOT/server/rankd" ]]; then
  RANKD="$E2E_ROOT/server/rankd"
  RANKCTL="$E2E_ROOT/client/rankctl"
else
  RANKD="$E2E_ROOT/bazel-bin/server/rankd"
  RANKCTL="$E2E_ROOT/bazel-bin/client/rankctl"
fi
E2E_DIR="$E2E_ROOT/tests/e2e"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
PY=/usr/bin/python3
export PYTHONDONTWRITEBYTECODE=1
FAILURES=0
RANKD_PID=""
RANKD_LOG=""
GRPC_PORT=""
METRICS_PORT=""
TARGET=""
_E2E_PIDS=()
_E2E_START=$SECONDS

fail() {
  echo "FAIL: $*" >&2
  FAILURES=$((FAILURES + 1))
}

log() { echo "[e2e +$((SECONDS - _E2E_START))s] $*" >&2; }

# die MESSAGE: fails the test at once (the trap still cleans up).
die() {
  echo "FATAL: $*" >&2
  [[ -n "$RANKD_LOG" && -f "$RANKD_LOG" ]] && { echo "--- rankd log (tail) ---" >&2; tail -n 30 "$RANKD_LOG" >&2; }
  exit 1
}

# track_pid PID: kill PID on exit if it is still running.
track_pid() { _E2E_PIDS+=("$1"); }

_e2e_cleanup() {
  local pid
  for pid in "${_E2E_PIDS[@]}" ${RANKD_PID:+"$RANKD_PID"}; do
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
    fi
  done
}
trap _e2e_cleanup EXIT

# sanitizer_reports: fails the test for every rankd log of this test that
# holds a sanitizer report (--config=asan / tsan builds; docs/testing.md).
# The server's stderr goes to its log, not to the test's output, and a
# report at exit would otherwise pass unseen.
sanitizer_reports() {
  local f
  for f in "$TMP"/rankd.*.log; do
    [[ -f "$f" ]] || continue
    if grep -qE '(ERROR|WARNING): (Address|Leak|Thread|UndefinedBehavior)Sanitizer|runtime error:' "$f"; then
      fail "sanitizer report in $f"
      grep -E -A30 '(ERROR|WARNING): (Address|Leak|Thread|UndefinedBehavior)Sanitizer|runtime error:' "$f" | head -60 >&2
    fi
  done
}

# finish: prints the verdict and exits 0 only without failures.
finish() {
  sanitizer_reports
  if [[ "$FAILURES" -ne 0 ]]; then
    echo "$FAILURES check(s) failed" >&2
    [[ -n "$RANKD_LOG" && -f "$RANKD_LOG" ]] && { echo "--- rankd log (tail) ---" >&2; tail -n 30 "$RANKD_LOG" >&2; }
    exit 1
  fi
  log "PASS"
  exit 0
}

# expect_eq NAME GOT WANT
expect_eq() {
  [[ "$2" == "$3" ]] || fail "$1: got '$2', want '$3'"
}

# expect_grep NAME FILE EXTENDED_REGEX
expect_grep() {
  grep -Eq -e "$3" "$2" || fail "$1: no /$3/ in $(basename "$2"): $(head -c 600 "$2")"
}

# run_bounded SECONDS CMD...: runs CMD with a wall-clock limit (exit 124 past it).
run_bounded() {
  local secs="$1"
  shift
  timeout --kill-after=5 "$secs" "$@"
}

# gen_model ROOT NAME [gen-model flags...]: writes ROOT/NAME/1.
gen_model() {
  local root="$1" name="$2"
  shift 2
  run_bounded 120 "$RANKD" gen-model --name "$name" --out "$root/$name/1" "$@" \
    2>"$TMP/gen-model.$name.err" || die "rankd gen-model $name: $(cat "$TMP/gen-model.$name.err")"
}

# gen_requests MODEL_DIR OUT [gen-requests flags...]
gen_requests() {
  local dir="$1" out="$2"
  shift 2
  run_bounded 120 "$RANKD" gen-requests --model "$dir" --output "$out" "$@" \
    2>"$TMP/gen-requests.err" || die "rankd gen-requests $dir: $(cat "$TMP/gen-requests.err")"
}

# reference_scores MODEL_DIR IN OUT: the server-less CPU scores (`rankd score`).
reference_scores() {
  run_bounded 300 "$RANKD" score --model "$1" --input "$2" --output "$3" 2>"$TMP/score.err" ||
    die "rankd score $1 $2: $(cat "$TMP/score.err")"
}

# set_model_options VERSION_DIR TEXT: adds text-format ModelConfig fields
# (e.g. "batching { max_queue_requests: 2 } instances { workers_per_device: 1 }")
# to model.pbtxt; the generator writes neither message, so they cannot clash.
set_model_options() {
  local pbtxt="$1/model.pbtxt"
  grep -Eq '^(batching|instances) ' "$pbtxt" && die "$pbtxt already sets batching/instances"
  printf '%s\n' "$2" >>"$pbtxt"
}

# model_features VERSION_DIR: the model's sparse feature names, in config
# order, comma-separated (from model.pbtxt, one- or multi-line form).
model_features() {
  awk '/^sparse_features *\{/ { f = 1 }
       f && match($0, /name: *"[^"]*"/) {
         s = substr($0, RSTART, RLENGTH); gsub(/name: *|"/, "", s); print s; f = 0
       }' "$1/model.pbtxt" | paste -sd, -
}

# start_rankd MODEL_ROOT [serve flags...]: starts `rankd serve` on 127.0.0.1
# with free ports; returns once the port file is written (i.e. serving).
# Sets RANKD_PID, GRPC_PORT, METRICS_PORT, HTTP_PORT (0 with --http_port -1),
# TARGET (127.0.0.1:GRPC_PORT), RANKD_LOG,
# ADMIN_PORT and ADMIN_TARGET (0 / unusable unless --admin_port 0 or a port is given:
# rankd's default admin port 8503 is not assumed free on a test machine).
start_rankd() {
  local root="$1"
  shift
  local port_file="$TMP/rankd.ports.$RANDOM$RANDOM"
  RANKD_LOG="$TMP/rankd.$RANDOM.log"
  rm -f "$port_file"
  "$RANKD" serve --model_root "$root" --host 127.0.0.1 --grpc_port 0 --metrics_port 0 \
    --admin_port -1 --http_port 0 --port_file "$port_file" "$@" >"$RANKD_LOG" 2>&1 &
  RANKD_PID=$!
  local i
  for ((i = 0; i < 600; i++)); do  # up to 60 s: loading + warm-up
    [[ -s "$port_file" ]] && break
    kill -0 "$RANKD_PID" 2>/dev/null || { wait "$RANKD_PID"; die "rankd exited with $? before serving"; }
    sleep 0.1
  done
  [[ -s "$port_file" ]] || die "rankd wrote no port file within 60 s"
  GRPC_PORT="$(sed -n 's/^grpc_port=//p' "$port_file")"
  METRICS_PORT="$(sed -n 's/^metrics_port=//p' "$port_file")"
  ADMIN_PORT="$(sed -n 's/^admin_port=//p' "$port_file")"
  HEALTH_PORT="$(sed -n 's/^health_port=//p' "$port_file")"
  HTTP_PORT="$(sed -n 's/^http_port=//p' "$port_file")"
  ADMIN_TARGET="127.0.0.1:$ADMIN_PORT"
  [[ "$GRPC_PORT" =~ ^[0-9]+$ && "$GRPC_PORT" -gt 0 ]] || die "bad port file: $(cat "$port_file")"
  [[ "$METRICS_PORT" =~ ^[0-9]+$ && "$METRICS_PORT" -gt 0 ]] || die "bad port file: $(cat "$port_file")"
  TARGET="127.0.0.1:$GRPC_PORT"
  log "rankd $RANKD_PID serving: grpc $GRPC_PORT, metrics $METRICS_PORT"
}

# stop_rankd [SIGNAL [WAIT_S]]: signals the server (default TERM), waits up to
# WAIT_S seconds (default 40) for it to exit (then kills it) and sets RANKD_RC
# to its exit status.
stop_rankd() {
  local sig="${1:-TERM}" wait_s="${2:-40}" i
  RANKD_RC=""
  [[ -n "$RANKD_PID" ]] || return 0
  kill "-$sig" "$RANKD_PID" 2>/dev/null
  for ((i = 0; i < wait_s * 10; i++)); do
    kill -0 "$RANKD_PID" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$RANKD_PID" 2>/dev/null; then
    fail "rankd did not exit within $wait_s s of SIG$sig"
    kill -KILL "$RANKD_PID" 2>/dev/null
  fi
  wait "$RANKD_PID"
  RANKD_RC=$?
  RANKD_PID=""
}

# rankctl ARGS...: rankctl against the started server, bounded.
rankctl() {
  run_bounded 120 "$RANKCTL" "$@" --target "$TARGET" --connect_timeout_ms 5000
}

# scrape FILE: the server's /metrics text into FILE.
scrape() {
  curl -sS --max-time 10 "http://127.0.0.1:$METRICS_PORT/metrics" >"$1" ||
    die "cannot scrape http://127.0.0.1:$METRICS_PORT/metrics"
}

# metric FILE NAME [LABEL="VALUE"...]: the value of the one sample of NAME
# carrying all those labels (any order, others allowed); "" when none; an
# error when several match.
metric() {
  local file="$1" name="$2"
  shift 2
  awk -v name="$name" -v nlab="$#" -v labs="$(printf '%s\n' "$@")" '
    BEGIN { n = split(labs, want, "\n") }
    {
      split($0, parts, " ")
      series = parts[1]
      base = series
      sub(/\{.*/, "", base)
      if (base != name) next
      ok = 1
      for (i = 1; i <= nlab; i++) {
        if (index(series, "{" want[i] ",") == 0 && index(series, "," want[i] ",") == 0 &&
            index(series, "{" want[i] "}") == 0 && index(series, "," want[i] "}") == 0) ok = 0
      }
      if (ok) { found++; value = parts[2] }
    }
    END {
      if (found > 1) { print "AMBIGUOUS"; exit }
      if (found == 1) print value
    }' "$file"
}

# metric_int FILE NAME LABELS...: metric() as an integer; a missing series
# stays "" (never 0, which could make a wrong expectation pass).
metric_int() {
  local v
  v="$(metric "$@")"
  [[ -z "$v" ]] && { echo ""; return; }
  awk -v v="$v" 'BEGIN { printf "%d\n", v }'
}

# free_port: a free TCP port on 127.0.0.1 (for tools that cannot pick one).
free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# admin_stubs DIR: Python stubs of rankd.v1.ModelControl into DIR (for
# lifecycle_util.py).
admin_stubs() {
  mkdir -p "$1"
  (cd "$E2E_ROOT" && run_bounded 60 "$PY" -m grpc_tools.protoc -Iprotos --python_out="$1" \
    --grpc_python_out="$1" protos/rankd/v1/model_control.proto) >"$TMP/admin_stubs.log" 2>&1 ||
    die "admin stubs: $(cat "$TMP/admin_stubs.log")"
}

# lifecycle ARGS...: tests/e2e/lifecycle_util.py with the admin stubs of $TMP/admin_stubs.
lifecycle() {
  [[ -d "$TMP/admin_stubs" ]] || admin_stubs "$TMP/admin_stubs"
  PYTHONPATH="$TMP/admin_stubs" run_bounded 120 "$PY" "$E2E_DIR/lifecycle_util.py" "$@"
}

# The Python client package (rankd_client, its stubs shipped inside): put this
# on PYTHONPATH (the test's data must include //client:python_package).
PY_CLIENT_PATH="$E2E_ROOT/client/python"

# check_admitted_answered EVENT ERR GOT WANT TOTAL M Q CODE...: after EVENT (a
# SIGTERM, an unload) in the middle of a `rankctl score` run of TOTAL lines
# (stderr ERR, responses GOT, expected responses of every line WANT), with M
# lines OK and Q more admitted when EVENT came: every line answered; failed
# lines only with the CODEs (never admitted); at least one failed (EVENT came
# during the run); at least M + Q OK (nothing admitted was lost); OK lines
# bit-exact. Writes $TMP/failed.txt ("LINE CODE" per failed line); sets
# FAILED and N_OK.
check_admitted_answered() {
  local event="$1" err="$2" got="$3" want="$4" total="$5" m="$6" q="$7"
  shift 7
  local codes=" $* " bad
  "$PY" "$E2E_DIR/e2e_util.py" rankctl-errors --stderr "$err" >"$TMP/failed.txt"
  FAILED=$(wc -l <"$TMP/failed.txt")
  N_OK=$(wc -l <"$got")
  log "$event: $N_OK ok, $FAILED failed of $total; codes: $(awk '{print $2}' "$TMP/failed.txt" | sort | uniq -c | tr '\n' ' ')"
  expect_eq "every line answered" "$((N_OK + FAILED))" "$total"
  bad="$(awk -v codes="$codes" 'index(codes, " " $2 " ") == 0' "$TMP/failed.txt" | head -5)"
  [[ -z "$bad" ]] || fail "lines failed with codes other than$codes: $bad"
  [[ "$FAILED" -ge 1 ]] || fail "no line failed: the run ended before $event, the test proves nothing"
  [[ "$N_OK" -ge $((m + q)) ]] ||
    fail "admitted requests lost: $N_OK lines OK, but $m were OK and $q more admitted before $event"
  compare_scores "responses through $event" "$want" "$got" \
    "$(awk '{print $1}' "$TMP/failed.txt" | paste -sd, -)"
}

# compare_scores NAME EXPECTED GOT [SKIP_LINES]: bit-exact ScoreResponse comparison.
compare_scores() {
  "$PY" "$E2E_DIR/e2e_util.py" compare --name "$1" --expected "$2" --got "$3" \
    ${4:+--skip_lines "$4"} || fail "$1: scores differ (see above)"
}
