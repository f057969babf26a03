#!/bin/bash
# rankctl end to end against fake_rankd (client/testing/): output order under
# concurrency, per-line errors, version labels, the admin commands (models,
# load, unload, label) on fake_rankd's admin port, exit codes, flag errors
# naming the flag.
set -u

if [[ -n "${TEST_SRCDIR:-}" ]]; then
  ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"  # bazel test: the runfiles tree
else
  ROOT="$(cd "$(dirname "$0")/.." && pwd)/bazel-bin"  # by hand, after a build
fi
RANKCTL="$ROOT/client/rankctl"
FAKE="$ROOT/client/fake_rankd"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
FAILURES=0

fail() {
  echo "FAIL: $*" >&2
  FAILURES=$((FAILURES + 1))
}

# expect_rc WANT NAME -- runs the rest; keeps its stdout/stderr in $TMP/out, $TMP/err.
expect_rc() {
  local want="$1" name="$2"
  shift 2
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [[ "$rc" != "$want" ]]; then
    fail "$name: exit $rc, want $want; stdout: $(head -c 500 "$TMP/out"); stderr: $(head -c 500 "$TMP/err")"
  fi
}

expect_grep() {  # NAME FILE PATTERN
  grep -q -e "$3" "$2" || fail "$1: no \"$3\" in $(basename "$2"): $(head -c 500 "$2")"
}

"$FAKE" >"$TMP/fake.out" 2>"$TMP/fake.err" &
FAKE_PID=$!
trap 'kill "$FAKE_PID" 2>/dev/null; wait "$FAKE_PID" 2>/dev/null' EXIT
for _ in $(seq 100); do
  grep -q '^port ' "$TMP/fake.out" && break
  sleep 0.1
done
PORT="$(awk '/^port /{print $2}' "$TMP/fake.out")"
ADMIN_PORT="$(awk '/^admin_port /{print $2}' "$TMP/fake.out")"
[[ -n "$PORT" && -n "$ADMIN_PORT" ]] || { echo "fake_rankd did not start: $(cat "$TMP/fake.err")" >&2; exit 1; }
T="--target=127.0.0.1:$PORT"
A="--admin_target=127.0.0.1:$ADMIN_PORT"
DEAD="--target=127.0.0.1:1"  # port 1 (tcpmux): nothing listens in a test sandbox
ADMIN_DEAD="--admin_target=127.0.0.1:1"

# --- health ------------------------------------------------------------------
expect_rc 0 "health" "$RANKCTL" health "$T"
expect_grep "health" "$TMP/out" '^SERVING$'
expect_rc 0 "health mini" "$RANKCTL" health "$T" --service=mini
expect_rc 1 "health draining" "$RANKCTL" health "$T" --service=draining
expect_grep "health draining" "$TMP/out" '^NOT_SERVING$'
expect_rc 1 "health unknown" "$RANKCTL" health "$T" --service=nope
expect_grep "health unknown" "$TMP/out" '^SERVICE_UNKNOWN$'
expect_rc 3 "health unreachable" "$RANKCTL" health "$DEAD"
expect_grep "health unreachable" "$TMP/err" 'UNAVAILABLE'
expect_grep "health unreachable" "$TMP/err" '127.0.0.1:1'

# --- info --------------------------------------------------------------------
expect_rc 0 "info" "$RANKCTL" info "$T" --model=mini --version 1
expect_grep "info" "$TMP/out" '"name": "mini"'
expect_grep "info" "$TMP/out" '"version": "1"'
expect_rc 0 "info newest" "$RANKCTL" info "$T" --model mini
expect_grep "info newest" "$TMP/out" '"version": "2"'
expect_rc 1 "info unknown model" "$RANKCTL" info "$T" --model=nope
expect_grep "info unknown model" "$TMP/err" 'NOT_FOUND: model "nope" is not served'
expect_rc 2 "info without --model" "$RANKCTL" info "$T"
expect_grep "info without --model" "$TMP/err" '--model'

expect_rc 0 "info --version_label" "$RANKCTL" info "$T" --model=mini --version_label=stable
expect_grep "info --version_label" "$TMP/out" '"version": "1"'
expect_grep "info --version_label" "$TMP/out" '"canary": "2"'
expect_rc 1 "info unknown label" "$RANKCTL" info "$T" --model=mini --version_label=nope
expect_grep "info unknown label" "$TMP/err" 'NOT_FOUND: model "mini" has no version label "nope" (labels: canary, stable)'
expect_rc 2 "info --version and --version_label" "$RANKCTL" info "$T" --model=mini --version=1 --version_label=stable
expect_grep "info --version and --version_label" "$TMP/err" '--version_label'

# --- flags -------------------------------------------------------------------
expect_rc 2 "bad --deadline_ms" "$RANKCTL" health "$T" --deadline_ms=0
expect_grep "bad --deadline_ms" "$TMP/err" '--deadline_ms'
expect_rc 2 "bad --max_message_bytes" "$RANKCTL" health "$T" --max_message_bytes=-1
expect_grep "bad --max_message_bytes" "$TMP/err" '--max_message_bytes'
expect_rc 2 "bad --concurrency" "$RANKCTL" score "$T" --concurrency=0 </dev/null
expect_grep "bad --concurrency" "$TMP/err" '--concurrency'
expect_rc 1 "malformed --deadline_ms" "$RANKCTL" health "$T" --deadline_ms=abc
expect_grep "malformed --deadline_ms" "$TMP/err" 'deadline_ms'
expect_rc 2 "unknown command" "$RANKCTL" frobnicate

# --- score -------------------------------------------------------------------
# 60 requests; the fake delays version v by (7v % 13) ms, so with 8 in flight
# they complete out of order. Line 20 fails on the server, line 30 is not JSON.
: >"$TMP/req.jsonl"
for v in $(seq 1 60); do
  if [[ $v == 20 ]]; then
    echo '{"model":"error","numCandidates":1}' >>"$TMP/req.jsonl"
  elif [[ $v == 30 ]]; then
    echo '{"model":"mini",' >>"$TMP/req.jsonl"
  else
    echo "{\"model\":\"mini\",\"version\":\"$v\",\"num_candidates\":2}" >>"$TMP/req.jsonl"
  fi
done
expect_rc 1 "score with errors" "$RANKCTL" score "$T" --concurrency=8 --input="$TMP/req.jsonl" --output="$TMP/resp.jsonl"
want="$(seq 1 60 | grep -vx -e 20 -e 30 | tr '\n' ' ')"
got="$(sed 's/.*"version":"\([0-9]*\)".*/\1/' "$TMP/resp.jsonl" | tr '\n' ' ')"
[[ "$got" == "$want" ]] || fail "score order: versions \"$got\", want \"$want\""
expect_grep "score with errors" "$TMP/resp.jsonl" '{"scores":\[0.0009765625,0.001953125\],"model":"mini","version":"1"}'
expect_grep "score with errors" "$TMP/err" 'req.jsonl:20: INVALID_ARGUMENT: dense: NaN at index 3'
expect_grep "score with errors" "$TMP/err" 'req.jsonl:30: INVALID_ARGUMENT: not a ScoreRequest'
[[ "$(grep -c ': INVALID_ARGUMENT' "$TMP/err")" == 2 ]] || fail "score: want 2 error lines: $(cat "$TMP/err")"

grep -v -e error -e '",$' "$TMP/req.jsonl" | head -5 >"$TMP/good.jsonl"
expect_rc 0 "score stdin" "$RANKCTL" score "$T" <"$TMP/good.jsonl"
[[ "$(wc -l <"$TMP/out")" == 5 ]] || fail "score stdin: want 5 lines: $(cat "$TMP/out")"

expect_rc 1 "score deadline" "$RANKCTL" score "$T" --deadline_ms=50 <<<'{"model":"slow","numCandidates":1}'
expect_grep "score deadline" "$TMP/err" 'stdin:1: DEADLINE_EXCEEDED'

expect_rc 3 "score unreachable" "$RANKCTL" score "$DEAD" <"$TMP/good.jsonl"
expect_grep "score unreachable" "$TMP/err" 'stdin:1: UNAVAILABLE'

expect_rc 1 "score missing input" "$RANKCTL" score "$T" --input="$TMP/no-such-file"
expect_grep "score missing input" "$TMP/err" '--input'

# versions_of FILE: the "version" of each ScoreResponse line, space-separated.
versions_of() { sed 's/.*"version":"\([0-9]*\)".*/\1/' "$1" | tr '\n' ' '; }

# Version labels: --version_label for the lines that name no version; a line's
# own versionLabel as is; a line naming a version or another label conflicts.
cat >"$TMP/labels.jsonl" <<'EOF'
{"model":"mini","numCandidates":1}
{"model":"mini","numCandidates":1,"versionLabel":"canary"}
{"model":"mini","numCandidates":1,"version":"5"}
{"model":"mini","numCandidates":1,"versionLabel":"stable"}
EOF
expect_rc 0 "score line labels" "$RANKCTL" score "$T" --input="$TMP/labels.jsonl"
[[ "$(versions_of "$TMP/out")" == "1 2 5 1 " ]] || fail "score line labels: $(cat "$TMP/out")"
expect_rc 1 "score --version_label" "$RANKCTL" score "$T" --version_label=canary --input="$TMP/labels.jsonl"
[[ "$(versions_of "$TMP/out")" == "2 2 " ]] || fail "score --version_label: $(cat "$TMP/out")"
expect_grep "score --version_label" "$TMP/err" 'labels.jsonl:3: INVALID_ARGUMENT: --version_label=canary, but the line names version 5'
expect_grep "score --version_label" "$TMP/err" 'labels.jsonl:4: INVALID_ARGUMENT: --version_label=canary, but the line names versionLabel "stable"'
expect_rc 1 "score unknown label" "$RANKCTL" score "$T" --version_label=nope <<<'{"model":"mini","numCandidates":1}'
expect_grep "score unknown label" "$TMP/err" 'stdin:1: NOT_FOUND: model "mini" has no version label "nope"'

# --- admin: models, load, unload, label ---------------------------------------
# fake_rankd's admin port starts with mini 1, 2 READY (stable -> 1, canary -> 2;
# 3 in the repository, not loaded), broken 1 FAILED, slow not loaded.
expect_rc 0 "models" "$RANKCTL" models "$A"
expect_grep "models" "$TMP/out" '^MODEL  *VERSION  *STATE  *LABELS  *LOAD_S  *WARMUP_S  *HBM  *HOST  *REASON$'
expect_grep "models" "$TMP/out" '^mini  *1  *READY  *stable  *0.25  *0.12  *64.0 MiB  *3.0 MiB$'
expect_grep "models" "$TMP/out" '^broken  *1  *FAILED .*weights.safetensors: emb_l.0.weight is \[10, 8\], want \[10, 16\]$'
expect_grep "models" "$TMP/out" '^slow  *-  *-'
expect_rc 0 "models --model" "$RANKCTL" models "$A" --model=mini
[[ "$(wc -l <"$TMP/out")" == 3 ]] || fail "models --model: want header + 2 rows: $(cat "$TMP/out")"
expect_rc 0 "models --json" "$RANKCTL" models "$A" --model=mini --json
/usr/bin/python3 - "$TMP/out" <<'EOF' || fail "models --json: not the ListModelsResponse: $(head -c 500 "$TMP/out")"
import json, sys
models = json.load(open(sys.argv[1]))["models"]
assert [m["name"] for m in models] == ["mini"], models
assert [(v["version"], v["state"]) for v in models[0]["versions"]] == [("1", "READY"), ("2", "READY")]
assert models[0]["labels"] == {"stable": "1", "canary": "2"}
assert models[0]["versions"][0]["deviceBytes"] == str(64 << 20)
EOF
expect_rc 1 "models unknown" "$RANKCTL" models "$A" --model=nope
expect_grep "models unknown" "$TMP/err" 'NOT_FOUND: model "nope" is not in the repository (models: broken, mini, slow)'

expect_rc 0 "load" "$RANKCTL" load "$A" --model=mini --versions=3
expect_grep "load" "$TMP/out" '^mini  *3  *READY  *-  *0.75'
expect_rc 0 "load --json" "$RANKCTL" load "$A" --model=mini --versions=3 --json
expect_grep "load --json" "$TMP/out" '"directory": "/models/mini/3"'
expect_rc 1 "load unknown version" "$RANKCTL" load "$A" --model=mini --versions=3,9
expect_grep "load unknown version" "$TMP/err" 'NOT_FOUND: model "mini" has no version 9 in the repository (versions: 1, 2, 3)'
expect_rc 1 "load failed version" "$RANKCTL" load "$A" --model=broken --versions=1
expect_grep "load failed version" "$TMP/out" '^broken  *1  *FAILED'
expect_grep "load failed version" "$TMP/err" 'rankctl load: broken version 1: FAILED: weights.safetensors'
expect_rc 1 "load policy, failed" "$RANKCTL" load "$A" --model=broken
expect_grep "load policy, failed" "$TMP/err" 'broken version 1: FAILED'
expect_rc 1 "load deadline" "$RANKCTL" load "$A" --model=slow --deadline_ms=50
expect_grep "load deadline" "$TMP/err" 'DEADLINE_EXCEEDED.*--deadline_ms=50'
expect_rc 0 "load slow" "$RANKCTL" load "$A" --model=slow
expect_rc 2 "load without --model" "$RANKCTL" load "$A"
expect_grep "load without --model" "$TMP/err" '--model'
expect_rc 2 "load bad --versions" "$RANKCTL" load "$A" --model=mini --versions=3,x
expect_grep "load bad --versions" "$TMP/err" '--versions: "x"'
expect_rc 2 "load --versions 0" "$RANKCTL" load "$A" --model=mini --versions=0
expect_grep "load --versions 0" "$TMP/err" '--versions'

expect_rc 0 "label" "$RANKCTL" label "$A" --model=mini --label=stable --version 3
expect_grep "label" "$TMP/out" '^mini  *3  *READY  *stable '
expect_rc 0 "label remove" "$RANKCTL" label "$A" --model=mini --label=canary --version=0
grep -q canary "$TMP/out" && fail "label remove: canary still listed: $(cat "$TMP/out")"
expect_rc 2 "label without --version" "$RANKCTL" label "$A" --model=mini --label=stable
expect_grep "label without --version" "$TMP/err" '--version: required'
expect_rc 2 "label without --label" "$RANKCTL" label "$A" --model=mini --version=1
expect_grep "label without --label" "$TMP/err" '--label'
expect_rc 2 "label negative --version" "$RANKCTL" label "$A" --model=mini --label=stable --version=-1
expect_grep "label negative --version" "$TMP/err" '--version'

expect_rc 0 "unload" "$RANKCTL" unload "$A" --model=mini --versions=1
expect_grep "unload" "$TMP/out" '^mini  *1  *UNLOADED '
expect_grep "unload" "$TMP/out" '^mini  *2  *READY '
expect_rc 1 "label not READY" "$RANKCTL" label "$A" --model=mini --label=stable --version=1
expect_grep "label not READY" "$TMP/err" 'FAILED_PRECONDITION: model "mini" version 1 is UNLOADED, not READY (ready: 2, 3)'
expect_rc 0 "unload all" "$RANKCTL" unload "$A" --model=mini --json
[[ "$(grep -c '"state": "UNLOADED"' "$TMP/out")" == 3 ]] || fail "unload all: $(cat "$TMP/out")"
expect_rc 1 "unload unknown" "$RANKCTL" unload "$A" --model=nope
expect_grep "unload unknown" "$TMP/err" 'NOT_FOUND'

expect_rc 3 "models unreachable" "$RANKCTL" models "$ADMIN_DEAD"
expect_grep "models unreachable" "$TMP/err" 'UNAVAILABLE.*--admin_target=127.0.0.1:1'
expect_rc 3 "load unreachable" "$RANKCTL" load "$ADMIN_DEAD" --model=mini --connect_timeout_ms=200
# The admin API is not on the public port (as in rankd).
expect_rc 1 "models on the public port" "$RANKCTL" models "--admin_target=127.0.0.1:$PORT"
expect_grep "models on the public port" "$TMP/err" 'UNIMPLEMENTED'
expect_rc 2 "admin command with --target" "$RANKCTL" models "$T"
expect_grep "admin command with --target" "$TMP/err" '--target: the admin commands take --admin_target'
expect_rc 2 "ranking command with --admin_target" "$RANKCTL" health "$A"
expect_grep "ranking command with --admin_target" "$TMP/err" '--admin_target'
expect_rc 2 "models bad --deadline_ms" "$RANKCTL" models "$A" --deadline_ms=0
expect_grep "models bad --deadline_ms" "$TMP/err" '--deadline_ms'
expect_rc 2 "models empty --admin_target" "$RANKCTL" models --admin_target=
expect_grep "models empty --admin_target" "$TMP/err" '--admin_target: must not be empty'

if [[ $FAILURES -gt 0 ]]; then
  echo "$FAILURES check(s) failed" >&2
  exit 1
fi
echo "PASS"
