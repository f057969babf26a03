#!/bin/bash
# rankctl end to end against fake_rankd (client/testing/): output order under
# concurrency, per-line errors, exit codes, flag errors naming the flag.
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
[[ -n "$PORT" ]] || { echo "fake_rankd did not start: $(cat "$TMP/fake.err")" >&2; exit 1; }
T="--target=127.0.0.1:$PORT"
DEAD="--target=127.0.0.1:1"  # port 1 (tcpmux): nothing listens in a test sandbox

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

if [[ $FAILURES -gt 0 ]]; then
  echo "$FAILURES check(s) failed" >&2
  exit 1
fi
echo "PASS"
