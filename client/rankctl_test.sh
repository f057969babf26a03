#!/bin/bash
# rankctl end to end against fake_rankd (client/testing/): output order under
# concurrency, per-line errors, version labels, the admin commands (models,
# load, unload, label, update, snapshot) on fake_rankd's admin port (and a
# second, flaky one for retries), exit codes, flag errors
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
[[ "$(grep -c '^mini ' "$TMP/out")" == 2 ]] || fail "models --model: want 2 rows: $(cat "$TMP/out")"
expect_grep "models --model" "$TMP/out" '^  mini 1: dynamic table t_item: 0 of 100 keys, 0 evicted$'
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

# --- admin: update, snapshot ---------------------------------------------------
# "unload all" above left every version UNLOADED: load 1 and 2 again.
expect_rc 0 "load for update" "$RANKCTL" load "$A" --model=mini --versions=1,2
# Delta files (safetensors) written with Debian's python3 + numpy.
/usr/bin/python3 - "$TMP" <<'PYEOF'
import json, struct, sys
import numpy as np
tmp = sys.argv[1]
def write(path, tensors, raw_header=None):
    header, data = {}, b""
    for name, (dtype, arr) in tensors.items():
        b = arr.tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = raw_header if raw_header is not None else json.dumps(header).encode()
    open(tmp + "/" + path, "wb").write(struct.pack("<Q", len(h)) + h + data)
ids = np.arange(10, dtype=np.int64)
write("delta.safetensors", {
    "t_user.ids": ("I64", ids), "t_user.rows": ("F32", np.ones((10, 4), np.float32)),
    "t_item.ids": ("I64", np.array([1, 2, 3], np.int64)),
    "t_item.rows": ("F16", np.ones((3, 4), np.float16)),
    "t_item.delete": ("I64", np.array([9], np.int64))})
write("bf16.safetensors", {"t_item.ids": ("I64", np.array([5], np.int64)),
                           "t_item.rows": ("BF16", np.ones((1, 4), np.uint16))})
write("rows_only.safetensors", {"t_user.rows": ("F32", np.ones((2, 4), np.float32))})
write("mismatch.safetensors", {"t_user.ids": ("I64", ids),
                               "t_user.rows": ("F32", np.ones((9, 4), np.float32))})
write("out_of_range.safetensors", {"t_user.ids": ("I64", np.array([5, 1000], np.int64)),
                                   "t_user.rows": ("F32", np.ones((2, 4), np.float32))})
write("badjson.safetensors", {}, raw_header=b'{"t_user.ids": ')
open(tmp + "/huge_header.safetensors", "wb").write(struct.pack("<Q", 1 << 40) + b"{}")
PYEOF
U=(update "$A" --model=mini)
expect_rc 0 "update" "$RANKCTL" "${U[@]}" --input="$TMP/delta.safetensors" --rows_per_message=4 --producer_id=job-1
expect_grep "update" "$TMP/out" '^table t_user: 10 rows, 0 deletes (F32, dim 4) in 3 messages, producer job-1, sequences 1\.\.3$'
expect_grep "update" "$TMP/out" '^table t_item: 3 rows, 1 deletes (F16, dim 4) in 1 messages, producer job-1, sequences 1\.\.1$'
expect_grep "update" "$TMP/out" "^127.0.0.1:$ADMIN_PORT: OK, 4 messages in .* (1 attempt), .* rows/s$"
expect_grep "update" "$TMP/out" '^  VERSION  TABLE   MESSAGES  DUPLICATES  ROWS  INSERTED  UPDATED  DELETED  NOT_FOUND  EVICTED$'
expect_grep "update" "$TMP/out" '^  2  *t_item  *1  *0  *3  *3  *0  *0  *1  *0$'
expect_grep "update" "$TMP/out" '^  1  *t_user  *3  *0  *10 '
expect_grep "update" "$TMP/out" '^total: 13 rows to 1 of 1 replicas in .* rows/s)$'
# Resumes after the server's positions (ListModels) for this producer.
expect_rc 0 "update resume" "$RANKCTL" "${U[@]}" --input="$TMP/delta.safetensors" --rows_per_message=4 --producer_id=job-1 --version=2
expect_grep "update resume" "$TMP/out" 'producer job-1, sequences 4\.\.6$'
expect_grep "update resume" "$TMP/out" '^  2  *t_item  *1  *0  *3  *0  *3  *0  *1  *0$'
# An explicit --start_sequence the server already applied: all duplicates.
expect_rc 0 "update duplicates" "$RANKCTL" "${U[@]}" --input="$TMP/delta.safetensors" --rows_per_message=4 --producer_id=job-1 --start_sequence=1
expect_grep "update duplicates" "$TMP/out" '^  1  *t_user  *0  *3  *0 '
expect_rc 0 "models positions" "$RANKCTL" models "$A" --model=mini
expect_grep "models positions" "$TMP/out" '^  mini 2: updates from job-1 to t_user: last sequence 6 at 20'
expect_grep "models positions" "$TMP/out" '^  mini 1: updates from job-1 to t_item: last sequence 1 at '
expect_grep "models positions" "$TMP/out" '^  mini 2: dynamic table t_item: 3 of 100 keys, 0 evicted$'
# The default producer id: rankctl@<hostname>.
expect_rc 0 "update default producer" "$RANKCTL" "${U[@]}" --input="$TMP/bf16.safetensors"
expect_grep "update default producer" "$TMP/out" "producer rankctl@$(hostname), sequences 1\.\.1$"
expect_grep "update default producer" "$TMP/out" '(BF16, dim 4)'
# Throttled and repeated: each pass with the next sequences, applied again.
expect_rc 0 "update --repeat" "$RANKCTL" "${U[@]}" --input="$TMP/delta.safetensors" --rows_per_message=4 --producer_id=rep --repeat=3 --max_rows_per_second=500
expect_grep "update --repeat" "$TMP/out" '^table t_user: 10 rows, 0 deletes (F32, dim 4) in 3 messages, producer rep, sequences 1\.\.3$'
expect_grep "update --repeat" "$TMP/out" '^stream: 4 messages (14 rows and deletes) per pass, 3 passes, at most 500 rows/s, to each replica$'
expect_grep "update --repeat" "$TMP/out" "^127.0.0.1:$ADMIN_PORT: OK, 3 passes, 12 messages in .* (3 streams), .* rows/s$"
expect_grep "update --repeat" "$TMP/out" '^  1  *t_user  *9  *0  *30 '
expect_grep "update --repeat" "$TMP/out" '^  2  *t_item  *3  *0  *9 '
expect_grep "update --repeat" "$TMP/out" '^total: 39 rows in 3 passes to 1 of 1 replicas in .* rows/s)$'
expect_rc 0 "models after --repeat" "$RANKCTL" models "$A" --model=mini
expect_grep "models after --repeat" "$TMP/out" '^  mini 2: updates from rep to t_user: last sequence 9 at 20'
expect_rc 0 "update --repeat_for_s" "$RANKCTL" "${U[@]}" --input="$TMP/delta.safetensors" --producer_id=rep --repeat=0 --repeat_for_s=0.2 --max_rows_per_second=200
expect_grep "update --repeat_for_s" "$TMP/out" 'producer rep, sequences 10\.\.10$'
expect_grep "update --repeat_for_s" "$TMP/out" '^stream: 2 messages (14 rows and deletes) per pass, passes for 0.2 s, at most 200 rows/s, to each replica$'
expect_grep "update --repeat_for_s" "$TMP/out" "^127.0.0.1:$ADMIN_PORT: OK, [0-9]* passes\?, .* rows/s$"
expect_rc 2 "update bad --max_rows_per_second" "$RANKCTL" "${U[@]}" --input="$TMP/delta.safetensors" --max_rows_per_second=-1
expect_grep "update bad --max_rows_per_second" "$TMP/err" '^rankctl update: --max_rows_per_second: must be >= 0'
expect_rc 2 "update bad --repeat" "$RANKCTL" "${U[@]}" --input="$TMP/delta.safetensors" --repeat=-1
expect_grep "update bad --repeat" "$TMP/err" '--repeat: must be >= 0'
expect_rc 2 "update --repeat 0 alone" "$RANKCTL" "${U[@]}" --input="$TMP/delta.safetensors" --repeat=0
expect_grep "update --repeat 0 alone" "$TMP/err" '--repeat 0 .* needs --repeat_for_s'
expect_rc 2 "update bad --repeat_for_s" "$RANKCTL" "${U[@]}" --input="$TMP/delta.safetensors" --repeat_for_s=-2
expect_grep "update bad --repeat_for_s" "$TMP/err" '--repeat_for_s: must be >= 0'
# Errors: the server's (final, not retried), the file's, the flags'.
expect_rc 1 "update server error" "$RANKCTL" "${U[@]}" --input="$TMP/out_of_range.safetensors"
expect_grep "update server error" "$TMP/err" 'INVALID_ARGUMENT: table "t_user", message 0 (sequence [0-9]*): id 1000 is out of range \[0, 1000) (0 messages before it applied)'
expect_rc 1 "update unknown model" "$RANKCTL" update "$A" --model=nope --input="$TMP/delta.safetensors"
expect_grep "update unknown model" "$TMP/err" 'NOT_FOUND: model "nope" is not in the repository'
expect_rc 1 "update rows without ids" "$RANKCTL" "${U[@]}" --input="$TMP/rows_only.safetensors"
expect_grep "update rows without ids" "$TMP/err" 'rows_only.safetensors: tensor "t_user.rows": no "t_user.ids" for it'
expect_rc 1 "update shape mismatch" "$RANKCTL" "${U[@]}" --input="$TMP/mismatch.safetensors"
expect_grep "update shape mismatch" "$TMP/err" 'tensor "t_user.rows": \[9, 4\] rows for 10 ids in "t_user.ids"'
expect_rc 1 "update bad header" "$RANKCTL" "${U[@]}" --input="$TMP/badjson.safetensors"
expect_grep "update bad header" "$TMP/err" 'header is not valid JSON'
expect_rc 1 "update huge header" "$RANKCTL" "${U[@]}" --input="$TMP/huge_header.safetensors"
expect_grep "update huge header" "$TMP/err" 'over the limit'
expect_rc 1 "update missing file" "$RANKCTL" "${U[@]}" --input="$TMP/nope.safetensors"
expect_grep "update missing file" "$TMP/err" '--input: .*nope.safetensors: cannot open'
expect_rc 2 "update without --input" "$RANKCTL" "${U[@]}"
expect_grep "update without --input" "$TMP/err" '--input: required'
expect_rc 2 "update without --model" "$RANKCTL" update "$A" --input="$TMP/delta.safetensors"
expect_grep "update without --model" "$TMP/err" '--model: required'
expect_rc 2 "update bad --start_sequence" "$RANKCTL" "${U[@]}" --input="$TMP/delta.safetensors" --start_sequence=0
expect_grep "update bad --start_sequence" "$TMP/err" '--start_sequence: must be >= 1'
expect_rc 2 "update bad --rows_per_message" "$RANKCTL" "${U[@]}" --input="$TMP/delta.safetensors" --rows_per_message=0
expect_grep "update bad --rows_per_message" "$TMP/err" '--rows_per_message'
expect_rc 3 "update unreachable" "$RANKCTL" update "$ADMIN_DEAD" --model=mini --input="$TMP/delta.safetensors" --retries=0
expect_grep "update unreachable" "$TMP/err" 'UNAVAILABLE.*--admin_target=127.0.0.1:1'
# --all_replicas: every address of the name (here localhost's).
expect_rc 0 "update --all_replicas" "$RANKCTL" update "--admin_target=localhost:$ADMIN_PORT" --all_replicas --model=mini --input="$TMP/delta.safetensors" --producer_id=fan
expect_grep "update --all_replicas" "$TMP/out" "^replica 127.0.0.1:$ADMIN_PORT: OK"
expect_rc 2 "update --all_replicas no port" "$RANKCTL" update --admin_target=localhost --all_replicas --model=mini --input="$TMP/delta.safetensors"
expect_grep "update --all_replicas no port" "$TMP/err" 'want host:port'
expect_rc 3 "update --all_replicas unknown host" "$RANKCTL" update --admin_target=no-such-host.invalid:8503 --all_replicas --model=mini --input="$TMP/delta.safetensors"
expect_grep "update --all_replicas unknown host" "$TMP/err" 'cannot resolve "no-such-host.invalid"'

# start_flaky N: a second fake admin server whose first N update streams
# break after one message; sets FLAKY (its --admin_target) and FLAKY_PID.
FLAKY_PID=""
start_flaky() {
  [[ -n "$FLAKY_PID" ]] && { kill "$FLAKY_PID" 2>/dev/null; wait "$FLAKY_PID" 2>/dev/null; }
  # Emptied here, not only by the background job's redirection, which may
  # run after the loop below has read the previous server's port.
  rm -f "$TMP/flaky.out"
  "$FAKE" --no_ranking --fail_updates="$1" >"$TMP/flaky.out" 2>"$TMP/flaky.err" &
  FLAKY_PID=$!
  for _ in $(seq 100); do
    grep -q '^admin_port ' "$TMP/flaky.out" && break
    sleep 0.1
  done
  FLAKY="--admin_target=127.0.0.1:$(awk '/^admin_port /{print $2}' "$TMP/flaky.out")"
}
trap 'kill "$FAKE_PID" $FLAKY_PID 2>/dev/null; wait "$FAKE_PID" $FLAKY_PID 2>/dev/null' EXIT
start_flaky 2
expect_rc 0 "update retries" "$RANKCTL" update "$FLAKY" --model=mini --input="$TMP/delta.safetensors" --rows_per_message=4 --producer_id=job-1
expect_grep "update retries" "$TMP/out" 'OK, 4 messages in .* (3 attempts)'
# Message 0 (t_item, sequence 1) was applied by the broken streams: skipped once.
expect_grep "update retries" "$TMP/out" '^  1  *t_item  *0  *1  *0 '
expect_grep "update retries" "$TMP/out" '^  1  *t_user  *3  *0  *10 '
start_flaky 5
expect_rc 3 "update retries run out" "$RANKCTL" update "$FLAKY" --model=mini --input="$TMP/delta.safetensors" --retries=1
expect_grep "update retries run out" "$TMP/err" 'UNAVAILABLE: fake_rankd: connection reset (--fail_updates) (after 2 attempts)'
expect_grep "update retries run out" "$TMP/out" 'FAILED'

expect_rc 0 "snapshot" "$RANKCTL" snapshot "$A" --model=mini --version=2
expect_grep "snapshot" "$TMP/out" '^mini version 2 -> version 4: /models/mini/4, 48.0 MiB (50331648 bytes) in 0.50 s$'
expect_grep "snapshot" "$TMP/out" '^  mini 4: snapshot of version 2$'
expect_grep "snapshot" "$TMP/out" '^  mini 4: updates from job-1 to t_user: last sequence 6 '
expect_rc 0 "snapshot --json" "$RANKCTL" snapshot "$A" --model=mini --new_version=9 --json
expect_grep "snapshot --json" "$TMP/out" '"directory": "/models/mini/9"'
expect_rc 1 "snapshot exists" "$RANKCTL" snapshot "$A" --model=mini --new_version=9
expect_grep "snapshot exists" "$TMP/err" 'ALREADY_EXISTS: model "mini" version 9 is already in the repository'
expect_rc 1 "snapshot not ready" "$RANKCTL" snapshot "$A" --model=broken
expect_grep "snapshot not ready" "$TMP/err" 'FAILED_PRECONDITION'
expect_rc 2 "snapshot without --model" "$RANKCTL" snapshot "$A"
expect_grep "snapshot without --model" "$TMP/err" '--model: required'
expect_rc 2 "snapshot bad --new_version" "$RANKCTL" snapshot "$A" --model=mini --new_version=-1
expect_grep "snapshot bad --new_version" "$TMP/err" '--new_version'
expect_rc 3 "snapshot unreachable" "$RANKCTL" snapshot "$ADMIN_DEAD" --model=mini

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
