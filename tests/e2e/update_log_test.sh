#!/bin/bash
# End to end: the update log (`rankd serve --update_log_dir`, issue 16) on the
# CPU backend: "with the update log a killed server restarts with every
# acknowledged update".
#   - a kaggle-shaped model with a STATIC and a DYNAMIC table serves with
#     --update_log_dir; `rankctl update` streams delta 1 (static rows, updated
#     keys, new keys, deleted keys) to every live version; the log grows;
#   - SIGKILL right after the update was acknowledged. A restart without the
#     log serves the model as on disk (so the comparison below can fail);
#     after garbage was appended to the log (a crash in the middle of an
#     append), a restart with it cuts the torn tail off with a warning,
#     replays the log, and serves scores equal bit for bit to `rankd score`
#     on a copy of the model to which this test applied delta 1 itself;
#   - `rankctl snapshot` writes version 2 and truncates the log (only its
#     header stays); delta 2 is sent to version 2 by number; SIGKILL; the
#     restart loads the snapshot and replays delta 2: scores equal the
#     test's model with both deltas;
#   - with a policy that keeps two versions, a snapshot keeps the log: the
#     restart loads the older version from its own directory and replays
#     the log onto it; both versions serve every update;
#   - an unusable --update_log_dir is refused at start, naming the flag.
source "$(dirname "$0")/lib.sh"
UTIL="$E2E_DIR/live_embeddings_util.py"

MODELS="$TMP/models"
LOGS="$TMP/update_logs"
ULOG="$LOGS/k.updlog"
gen_model "$MODELS" k --preset kaggle --scale 0.0005 --dynamic_tables 1 --seed 3
DYN=$(grep -B2 'kind: DYNAMIC' "$MODELS/k/1/model.pbtxt" | sed -n 's/.*name: "\(.*\)"/\1/p')
[[ -n "$DYN" ]] || die "no DYNAMIC table in the generated model"
"$PY" "$UTIL" grow "$MODELS/k/1" "$DYN" 100 || die "grow"
cp -r "$MODELS/k/1" "$TMP/original"
# Delta 2 is made against the model with delta 1 (its updated and deleted
# keys exist there), and touches rows delta 1 touched too.
"$PY" "$UTIL" make-delta "$TMP/original" "$TMP/delta1.safetensors" "$TMP/touched1.json" 5 ||
  die "make-delta 1"
"$PY" "$UTIL" apply-delta "$TMP/original" "$TMP/delta1.safetensors" "$TMP/expected1" ||
  die "apply-delta 1"
"$PY" "$UTIL" make-delta "$TMP/expected1" "$TMP/delta2.safetensors" "$TMP/touched2.json" 11 ||
  die "make-delta 2"
"$PY" "$UTIL" apply-delta "$TMP/expected1" "$TMP/delta2.safetensors" "$TMP/expected2" ||
  die "apply-delta 2"
"$PY" - "$TMP/touched1.json" "$TMP/touched2.json" "$TMP/touched.json" <<'PYEOF' || die "merge"
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
json.dump({t: a.get(t, []) + b.get(t, []) for t in set(a) | set(b)}, open(sys.argv[3], "w"))
PYEOF
gen_requests "$TMP/original" "$TMP/req0.jsonl" --count 20 --candidates 7 --seed 9
"$PY" "$UTIL" touch-requests "$TMP/req0.jsonl" "$TMP/touched.json" "$TMP/req.jsonl" ||
  die "touch-requests"
reference_scores "$TMP/original" "$TMP/req.jsonl" "$TMP/want0.jsonl"
reference_scores "$TMP/expected1" "$TMP/req.jsonl" "$TMP/want1.jsonl"
reference_scores "$TMP/expected2" "$TMP/req.jsonl" "$TMP/want2.jsonl"
# The expectations differ from each other, else the checks prove nothing.
"$PY" - "$TMP/want0.jsonl" "$TMP/want1.jsonl" "$TMP/want2.jsonl" <<'PYEOF' ||
import json, sys
runs = [[json.loads(l)["scores"] for l in open(p)] for p in sys.argv[1:]]
for i in range(len(runs) - 1):
    if runs[i] == runs[i + 1]:
        sys.exit(f"{sys.argv[i + 1]} and {sys.argv[i + 2]} have the same scores")
PYEOF
  die "the deltas do not change the scores of the requests"

admin() { run_bounded 120 "$RANKCTL" "$@" --admin_target "$ADMIN_TARGET" --connect_timeout_ms 5000; }
file_size() { stat -c %s "$1"; }
# served NAME WANT: scores every request through the server ($TMP/got.NAME.jsonl)
# and compares them with WANT bit for bit.
served() {
  rankctl score --input "$TMP/req.jsonl" --output "$TMP/got.$1.jsonl" --concurrency 4 \
    2>"$TMP/score.$1.err" || fail "$1: rankctl score: $(cat "$TMP/score.$1.err")"
  compare_scores "$1" "$2" "$TMP/got.$1.jsonl"
}

# 1. Delta 1 to every live version, logged.
start_rankd "$MODELS" --admin_port 0 --update_log_dir "$LOGS"
admin update --model k --input "$TMP/delta1.safetensors" --producer_id e2e --rows_per_message 4 \
  >"$TMP/update1.out" 2>&1 || fail "rankctl update 1: $(cat "$TMP/update1.out")"
[[ -f "$ULOG" ]] || die "no update log $ULOG: $(ls -la "$LOGS" 2>&1)"
log_bytes=$(file_size "$ULOG")
[[ "$log_bytes" -gt 1000 ]] || fail "update log after delta 1: $log_bytes bytes"
scrape "$TMP/metrics1.txt"
expect_eq "rankd_update_log_bytes after delta 1" \
  "$(metric_int "$TMP/metrics1.txt" rankd_update_log_bytes 'model="k"')" "$log_bytes"
served after_delta1 "$TMP/want1.jsonl"
stop_rankd KILL

# 2. Control: without the log, a restart has lost delta 1.
start_rankd "$MODELS" --admin_port 0
served restarted_without_the_log "$TMP/want0.jsonl"
stop_rankd KILL
expect_eq "the log is untouched by a server without --update_log_dir" \
  "$(file_size "$ULOG")" "$log_bytes"

# 3. A crash in the middle of an append left part of a record behind. This
# server (replay, snapshot, delta 2) stages updates on the stream's own
# thread (--update_cpu_priority normal); the others on the idle helper.
printf 'LURG\x10\x00\x00\x00torn' >>"$ULOG"
start_rankd "$MODELS" --admin_port 0 --update_log_dir "$LOGS" --update_cpu_priority normal
expect_grep "torn tail cut off with a warning" "$RANKD_LOG" \
  "warn.*update log .*k\.updlog: cut off a torn tail of 12 bytes at offset $log_bytes"
expect_eq "log size after the torn tail was cut" "$(file_size "$ULOG")" "$log_bytes"
expect_grep "replay counted" "$RANKD_LOG" \
  "model k version 1: update log replayed: [1-9][0-9]* messages applied, 0 skipped"
served restarted_with_the_log "$TMP/want1.jsonl"
admin models --model k >"$TMP/models1.txt" 2>&1 || fail "models: $(cat "$TMP/models1.txt")"
expect_grep "producer position restored by the replay" "$TMP/models1.txt" "e2e.*$DYN"

# 4. A snapshot of the only READY version truncates the log.
admin snapshot --model k >"$TMP/snap.out" 2>&1 || fail "snapshot: $(cat "$TMP/snap.out")"
expect_grep "snapshot log line" "$RANKD_LOG" "model k version 2: snapshot .*update log truncated"
expect_eq "log size after the snapshot (the header)" "$(file_size "$ULOG")" 16
admin update --model k --model_version 2 --input "$TMP/delta2.safetensors" --producer_id e2e \
  --rows_per_message 4 >"$TMP/update2.out" 2>&1 ||
  fail "rankctl update 2: $(cat "$TMP/update2.out")"
[[ "$(file_size "$ULOG")" -gt 1000 ]] || fail "update log after delta 2: $(file_size "$ULOG") bytes"
served after_snapshot_and_delta2 "$TMP/want2.jsonl"
stop_rankd KILL

# 5. The restart loads the snapshot (version 2) and replays delta 2 onto it.
start_rankd "$MODELS" --admin_port 0 --update_log_dir "$LOGS"
expect_grep "replay onto the snapshot" "$RANKD_LOG" \
  "model k version 2: update log replayed: [1-9][0-9]* messages applied, 0 skipped"
served restarted_after_snapshot "$TMP/want2.jsonl"
"$PY" - "$TMP/got.restarted_after_snapshot.jsonl" <<'PYEOF' || fail "not served by version 2"
import json, sys
versions = {json.loads(l).get("version") for l in open(sys.argv[1])}
sys.exit(0 if versions == {"2"} else f"versions {versions}")
PYEOF
# Sent again, delta 2 is skipped (duplicates), logged, and changes nothing.
admin update --model k --input "$TMP/delta2.safetensors" --producer_id e2e --rows_per_message 4 \
  --start_sequence 1 >"$TMP/retry.out" 2>&1 || fail "retry: $(cat "$TMP/retry.out")"
stop_rankd KILL
start_rankd "$MODELS" --admin_port 0 --update_log_dir "$LOGS"
expect_grep "duplicates skipped by the replay" "$RANKD_LOG" \
  "model k version 2: update log replayed: [1-9][0-9]* messages applied, [1-9][0-9]* skipped"
served restarted_after_retry "$TMP/want2.jsonl"
stop_rankd TERM

# 6. With two READY versions a snapshot keeps the log: after a restart,
#    version 2 (the first snapshot, which the policy keeps beside the new
#    one) loads from its own directory and needs the log's delta 2.
printf 'version_policy { latest { num_versions: 2 } }\n' >"$MODELS/k/serving.pbtxt"
start_rankd "$MODELS" --admin_port 0 --update_log_dir "$LOGS"
admin models --model k >"$TMP/models6.txt" 2>&1 || fail "models: $(cat "$TMP/models6.txt")"
expect_grep "version 1 READY beside version 2" "$TMP/models6.txt" '^k +1 +READY'
log_bytes=$(file_size "$ULOG")
admin snapshot --model k --model_version 2 >"$TMP/snap3.out" 2>&1 ||
  fail "snapshot 3: $(cat "$TMP/snap3.out")"
expect_grep "snapshot beside another READY version" "$RANKD_LOG" \
  "model k version 3: snapshot of version 2 .*update log kept"
expect_eq "log size after a snapshot beside another READY version" \
  "$(file_size "$ULOG")" "$log_bytes"
stop_rankd KILL
start_rankd "$MODELS" --admin_port 0 --update_log_dir "$LOGS"
admin models --model k >"$TMP/models7.txt" 2>&1 || fail "models: $(cat "$TMP/models7.txt")"
expect_grep "version 2 READY after the restart" "$TMP/models7.txt" '^k +2 +READY'
expect_grep "version 3 READY after the restart" "$TMP/models7.txt" '^k +3 +READY'
served restarted_two_versions_v3 "$TMP/want2.jsonl"
"$PY" - "$TMP/req.jsonl" "$TMP/req_v2.jsonl" <<'PYEOF' || die "req_v2"
import json, sys
with open(sys.argv[2], "w") as f:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        r["version"] = "2"
        f.write(json.dumps(r) + "\n")
PYEOF
rankctl score --input "$TMP/req_v2.jsonl" --output "$TMP/got_v2.jsonl" --concurrency 4 \
  2>"$TMP/score_v2.err" || fail "score version 2: $(cat "$TMP/score_v2.err")"
compare_scores "version 2 after the restart" "$TMP/want2.jsonl" "$TMP/got_v2.jsonl"
stop_rankd TERM

# 7. An unusable directory is refused at start.
touch "$TMP/a_file"
run_bounded 60 "$RANKD" serve --model_root "$MODELS" --host 127.0.0.1 --grpc_port 0 \
  --metrics_port -1 --admin_port -1 --http_port -1 --update_log_dir "$TMP/a_file/logs" >"$TMP/bad_dir.out" 2>&1
expect_eq "exit status with an unusable --update_log_dir" "$?" 2
expect_grep "bad directory named" "$TMP/bad_dir.out" "--update_log_dir: .*a_file/logs"
finish
