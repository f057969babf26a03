#!/bin/bash
# End to end (issue 17, defects 2, 3, 4 and 10): hostile model files fail
# fast with an error naming the file and the reason, in `rankd serve`,
# `rankd score` and `rankd inspect --check`; nothing crashes or hangs; and
# SIGTERM while models load at start exits 0 at once instead of finishing
# the load first.
# - weights.safetensors whose header nests an array 100,000 deep (200 KB):
#   crashed serve and score with SIGSEGV (exit 139).
# - weights.safetensors that is a FIFO: blocked the load forever (every
#   command here runs under a timeout: 124 means it hung).
# - an embedding row holding NaN: served NaN scores with OK; now refused at
#   load naming the table and the row.
# - model.pbtxt asking for 100,000 workers: aborted serve and score in
#   std::thread (a thread count the process cannot start); now refused as
#   past the limit, naming the field.
# - `rankd inspect` without --check reads model.pbtxt only (exit 0 for the
#   weights files' defects, 1 for the config's); --check loads the version
#   and exits 1 with the error.
source "$(dirname "$0")/lib.sh"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
GOOD="$MODELS/mini/1"
gen_requests "$GOOD" "$TMP/req.jsonl" --count 2 --candidates 4

# bad_version NAME: a copy of the good version as $TMP/bad/NAME/mini/1.
bad_version() {
  local dir="$TMP/bad/$1/mini/1"
  mkdir -p "$dir"
  cp "$GOOD/model.pbtxt" "$GOOD/weights.safetensors" "$dir/"
  echo "$dir"
}

DEEP="$(bad_version deep)"
"$PY" - "$DEEP/weights.safetensors" <<'PYEOF' || die "cannot write the deep header"
import struct, sys
header = ('{"a": ' + "[" * 100000 + "]" * 100000 + "}").encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(header)) + header)
PYEOF

FIFO="$(bad_version fifo)"
rm "$FIFO/weights.safetensors"
mkfifo "$FIFO/weights.safetensors" || die "mkfifo"

NAN="$(bad_version nan)"
# Row 5, element 3 of table t2 (the tensor emb_l.2.weight) := NaN.
"$PY" - "$NAN/weights.safetensors" <<'PYEOF' || die "cannot write the NaN row"
import json, struct, sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
entry = json.loads(data[8:8 + n])["emb_l.2.weight"]
dim = entry["shape"][1]
at = 8 + n + entry["data_offsets"][0] + 4 * (5 * dim + 3)
data[at:at + 4] = struct.pack("<f", float("nan"))
open(path, "wb").write(bytes(data))
PYEOF

THREADS="$(bad_version threads)"
echo 'instances { workers_per_device: 100000 }' >>"$THREADS/model.pbtxt"

# check_fails NAME RC OUT REGEX: exit status 1 (not a crash, not a timeout)
# and the error in OUT.
check_fails() {
  local name="$1" rc="$2" out="$3" regex="$4"
  expect_eq "$name: exit status (124 = hung, 139 = SIGSEGV)" "$rc" 1
  expect_grep "$name: error" "$out" "$regex"
}

for case in deep fifo nan threads; do
  dir="$TMP/bad/$case/mini/1"
  case "$case" in
    deep) want='weights.safetensors: header nests arrays and objects more than 64 levels deep.*the limit is 64' ;;
    fifo) want='weights.safetensors: is a FIFO \(named pipe\), not a regular file' ;;
    nan) want="weights.safetensors: tensor 'emb_l.2.weight' \(table 't2'\): row 5 element 3 is nan" ;;
    threads) want='model.pbtxt: instances.workers_per_device: must be in \[0, 1024\] \(0 = automatic\), got 100000' ;;
  esac
  log "$case: rankd serve, score, inspect --check"
  run_bounded 60 "$RANKD" serve --model_root "$TMP/bad/$case" --model_control none --host 127.0.0.1 \
    --grpc_port 0 --metrics_port -1 --admin_port -1 --http_port -1 >"$TMP/serve.$case.out" 2>&1
  check_fails "$case: serve" "$?" "$TMP/serve.$case.out" "cannot load models: .*$want"
  run_bounded 60 "$RANKD" score --model "$dir" --input "$TMP/req.jsonl" --output /dev/null \
    >"$TMP/score.$case.out" 2>&1
  check_fails "$case: score" "$?" "$TMP/score.$case.out" "$want"
  run_bounded 60 "$RANKD" inspect --model "$dir" --check >"$TMP/check.$case.out" 2>&1
  check_fails "$case: inspect --check" "$?" "$TMP/check.$case.out" "check failed: .*$want"
  # Without --check, inspect reads model.pbtxt only (documented): 0 unless
  # model.pbtxt is what is wrong.
  run_bounded 60 "$RANKD" inspect --model "$dir" >"$TMP/inspect.$case.out" 2>&1
  expect_eq "$case: inspect without --check" "$?" "$([[ "$case" == threads ]] && echo 1 || echo 0)"
done

run_bounded 120 "$RANKD" inspect --model "$GOOD" --check >"$TMP/check.good.out" 2>&1
expect_eq "inspect --check of a good version" "$?" 0
expect_grep "inspect --check says OK" "$TMP/check.good.out" '^check: OK'

# SIGTERM while the only model loads at start: 1.6 GB of generated rows take
# seconds to fill; the load is cancelled at its next 8 MiB chunk and the
# server exits 0 without serving (before, it loaded everything first).
BIG="$TMP/big"
gen_model "$BIG" mini --preset mini --init random
sed -i '0,/num_rows: 10$/s//num_rows: 100000000/' "$BIG/mini/1/model.pbtxt"
grep -q 'num_rows: 100000000' "$BIG/mini/1/model.pbtxt" || die "cannot grow table t0"
RANKD_LOG="$TMP/big.log"
"$RANKD" serve --model_root "$BIG" --host 127.0.0.1 --grpc_port 0 --metrics_port -1 \
  --admin_port -1 --http_port -1 >"$RANKD_LOG" 2>&1 &
RANKD_PID=$!
for ((i = 0; i < 600; i++)); do
  grep -q 'model mini version 1: loading from' "$RANKD_LOG" && break
  kill -0 "$RANKD_PID" 2>/dev/null || break
  sleep 0.05
done
expect_grep "the load started" "$RANKD_LOG" 'model mini version 1: loading from'
stop_rankd TERM
expect_eq "exit status after SIGTERM during the load" "$RANKD_RC" 0
expect_grep "stop logged at once" "$RANKD_LOG" 'SIGTERM: stop requested \(model loads in progress are cancelled'
expect_grep "load cancelled" "$RANKD_LOG" "model mini version 1 FAILED: loading model 'mini' v1 from .*: cancelled"
expect_grep "exit logged" "$RANKD_LOG" 'SIGTERM received while loading models: exiting without serving'
if grep -q 'serving 1 model' "$RANKD_LOG"; then fail "the server finished loading and served after SIGTERM"; fi
finish
