#!/bin/bash
# End to end: online embedding updates (issue 16) on the CPU backend.
#   - a kaggle-shaped model with a STATIC and a DYNAMIC table (room for 100
#     more keys) serves; `rankctl update` streams a delta: updated static
#     rows, updated keys, new keys, deleted keys;
#   - requests that touch exactly those ids score bit for bit like
#     `rankd score` on a copy of the model to which this test applied the
#     same delta itself (live_embeddings_util.py apply-delta);
#   - the same delta re-sent with the same sequences is skipped (duplicates)
#     and changes no score; rankctl models shows the producer's position;
#   - `rankctl snapshot` writes version 2 and the server adopts it in place:
#     it serves as version 2 (version 1 unloaded by the policy "latest 1"),
#     and `rankd score` on the snapshot directory gives the same bits;
#   - bad updates: an unknown table is NOT_FOUND, a static id out of range
#     INVALID_ARGUMENT naming the table, the message and the position; the
#     metrics count the rows;
#   - one message larger than gRPC's default 4 MiB receive limit (rankctl
#     --max_payload_bytes) is taken by the admin listener (its limit is
#     --max_message_bytes); a bad --max_payload_bytes is refused by name;
#   - a bad --update_cpu_priority is refused by name (its two values are run
#     by this test, idle by default, and by update_log_test.sh, normal).
source "$(dirname "$0")/lib.sh"
UTIL="$E2E_DIR/live_embeddings_util.py"

MODELS="$TMP/models"
gen_model "$MODELS" k --preset kaggle --scale 0.0005 --dynamic_tables 1 --seed 3
DYN=$(grep -B2 'kind: DYNAMIC' "$MODELS/k/1/model.pbtxt" | sed -n 's/.*name: "\(.*\)"/\1/p')
[[ -n "$DYN" ]] || die "no DYNAMIC table in the generated model"
"$PY" "$UTIL" grow "$MODELS/k/1" "$DYN" 100 || die "grow"
cp -r "$MODELS/k/1" "$TMP/original"
# A second model with a table big enough for a message over 4 MiB (its MLPs
# narrowed through gen-model's width flags; a bad width list is refused).
gen_model "$MODELS" big --preset kaggle --scale 0.01 --seed 4 --bottom_mlp 32,16 --top_mlp 64,1
grep -q 'top_mlp: 64' "$MODELS/big/1/model.pbtxt" || die "--top_mlp not in big's model.pbtxt"
"$RANKD" gen-model --preset kaggle --top_mlp 64,x --out "$TMP/bad_widths/1" 2>"$TMP/bad_widths.err"
expect_eq "gen-model --top_mlp 64,x: exit" "$?" 2
expect_grep "gen-model names the bad flag" "$TMP/bad_widths.err" \
  'top_mlp: expected comma-separated whole numbers, got "64,x"'
"$PY" "$UTIL" make-delta "$TMP/original" "$TMP/delta.safetensors" "$TMP/touched.json" 5 ||
  die "make-delta"
"$PY" "$UTIL" apply-delta "$TMP/original" "$TMP/delta.safetensors" "$TMP/expected_model" ||
  die "apply-delta"
gen_requests "$TMP/original" "$TMP/req0.jsonl" --count 20 --candidates 7 --seed 9
"$PY" "$UTIL" touch-requests "$TMP/req0.jsonl" "$TMP/touched.json" "$TMP/req.jsonl" ||
  die "touch-requests"
reference_scores "$TMP/expected_model" "$TMP/req.jsonl" "$TMP/want.jsonl"
reference_scores "$TMP/original" "$TMP/req.jsonl" "$TMP/before.jsonl"

start_rankd "$MODELS" --admin_port 0
admin() { run_bounded 120 "$RANKCTL" "$@" --admin_target "$ADMIN_TARGET" --connect_timeout_ms 5000; }

rankctl score --input "$TMP/req.jsonl" --output "$TMP/got0.jsonl" --concurrency 4 2>"$TMP/s0.err" ||
  fail "score before the update: $(cat "$TMP/s0.err")"
compare_scores "before the update" "$TMP/before.jsonl" "$TMP/got0.jsonl"

admin update --model k --input "$TMP/delta.safetensors" --producer_id e2e --rows_per_message 4 \
  >"$TMP/update.out" 2>&1 || fail "rankctl update: $(cat "$TMP/update.out")"
log "update: $(grep -E 'OK|total' "$TMP/update.out" | head -2 | tr '\n' ' ')"
# Static table: 6 rows; dynamic: 5 updated + 6 new, 3 deleted (in 2 + 3 messages).
expect_grep "dynamic table counts" "$TMP/update.out" \
  "^ +1 +$DYN +[0-9]+ +0 +11 +6 +5 +3 +0 +0$"
rankctl score --input "$TMP/req.jsonl" --output "$TMP/got.jsonl" --concurrency 4 2>"$TMP/s1.err" ||
  fail "score after the update: $(cat "$TMP/s1.err")"
compare_scores "served after the update vs the delta applied by the test" \
  "$TMP/want.jsonl" "$TMP/got.jsonl"

# A producer retrying from sequence 1: every message is a duplicate.
admin update --model k --input "$TMP/delta.safetensors" --producer_id e2e --rows_per_message 4 \
  --start_sequence 1 >"$TMP/retry.out" 2>&1 || fail "retry: $(cat "$TMP/retry.out")"
expect_grep "retry: dynamic messages all duplicates" "$TMP/retry.out" \
  "^ +1 +$DYN +0 +[1-9][0-9]* +0 +0 +0 +0 +0 +0$"
rankctl score --input "$TMP/req.jsonl" --output "$TMP/got_retry.jsonl" --concurrency 4 \
  2>"$TMP/s2.err" || fail "score after the retry: $(cat "$TMP/s2.err")"
compare_scores "after a retried stream" "$TMP/want.jsonl" "$TMP/got_retry.jsonl"
admin models --model k >"$TMP/models1.txt" 2>&1 || fail "models: $(cat "$TMP/models1.txt")"
expect_grep "producer position shown" "$TMP/models1.txt" "e2e.*$DYN"

scrape "$TMP/metrics.txt"
rows=$(metric_int "$TMP/metrics.txt" rankd_embedding_updates_total "model=\"k\"" "table=\"$DYN\"")
expect_eq "rankd_embedding_updates_total of $DYN" "$rows" 11
keys=$(metric_int "$TMP/metrics.txt" rankd_dynamic_table_keys "model=\"k\"" "table=\"$DYN\"")
loaded=$(grep -A2 "name: \"$DYN\"" "$TMP/original/model.pbtxt" |
  sed -n 's/.*num_rows: //p')
expect_eq "rankd_dynamic_table_keys of $DYN" "$keys" $((loaded + 6 - 3))

# Snapshot: version 2, adopted in place.
admin snapshot --model k >"$TMP/snap.out" 2>&1 || fail "snapshot: $(cat "$TMP/snap.out")"
[[ -f "$MODELS/k/2/weights.safetensors" && -f "$MODELS/k/2/update_positions.json" ]] ||
  fail "snapshot files missing: $(ls -la "$MODELS/k" "$MODELS/k/2" 2>&1)"
grep -q '"producer_id": "e2e"' "$MODELS/k/2/update_positions.json" ||
  fail "snapshot positions: $(cat "$MODELS/k/2/update_positions.json")"
admin models --model k >"$TMP/models2.txt" 2>&1 || fail "models: $(cat "$TMP/models2.txt")"
expect_grep "version 2 READY" "$TMP/models2.txt" '^k +2 +READY'
expect_grep "version 1 unloaded" "$TMP/models2.txt" '^k +1 +UNLOADED'
reference_scores "$MODELS/k/2" "$TMP/req.jsonl" "$TMP/snap_want.jsonl"
compare_scores "rankd score on the snapshot vs the delta applied by the test" \
  "$TMP/want.jsonl" "$TMP/snap_want.jsonl"
rankctl score --input "$TMP/req.jsonl" --output "$TMP/got2.jsonl" --concurrency 4 2>"$TMP/s3.err" ||
  fail "score after the snapshot: $(cat "$TMP/s3.err")"
"$PY" - "$TMP/got2.jsonl" <<'PYEOF' || fail "responses after the snapshot do not come from version 2"
import json, sys
versions = {json.loads(l).get("version") for l in open(sys.argv[1])}
sys.exit(0 if versions == {"2"} else f"versions {versions}")
PYEOF
compare_scores "served by the adopted snapshot" "$TMP/want.jsonl" "$TMP/got2.jsonl"

# Bad updates.
"$PY" -c "
import sys; sys.path.insert(0, '$E2E_DIR')
import numpy as np, live_embeddings_util as u
u.write_st('$TMP/unknown.safetensors', {'nope.ids': np.array([1], np.int64),
           'nope.rows': np.ones((1, 16), np.float32)})
u.write_st('$TMP/range.safetensors', {'t3.ids': np.array([0, 5, 99999], np.int64),
           't3.rows': np.ones((3, 16), np.float32)})
" || die "writing bad deltas"
admin update --model k --input "$TMP/unknown.safetensors" --producer_id bad >"$TMP/bad1.out" 2>&1
expect_eq "unknown table: exit" "$?" 1
expect_grep "unknown table: NOT_FOUND naming the tables" "$TMP/bad1.out" 'NOT_FOUND.*nope.*t0'
admin update --model k --input "$TMP/range.safetensors" --producer_id bad >"$TMP/bad2.out" 2>&1
expect_eq "static id out of range: exit" "$?" 1
expect_grep "out of range: INVALID_ARGUMENT naming message, table, position" "$TMP/bad2.out" \
  'INVALID_ARGUMENT.*message 0.*table t3.*ids\[2\] = 99999 is out of range'
rankctl score --input "$TMP/req.jsonl" --output "$TMP/got3.jsonl" --concurrency 4 2>"$TMP/s4.err" ||
  fail "score after bad updates: $(cat "$TMP/s4.err")"
compare_scores "bad updates changed nothing" "$TMP/want.jsonl" "$TMP/got3.jsonl"

# One 80,000-row message (about 5.8 MB of rows and ids) into the big model.
"$PY" "$UTIL" make-delta-static "$MODELS/big/1" "$TMP/big.safetensors" "$TMP/big.json" 5 80000 1 ||
  die "make-delta-static"
admin update --model big --input "$TMP/big.safetensors" --producer_id e2e-big \
  --rows_per_message 100000 --max_payload_bytes 8000000 >"$TMP/big.out" 2>&1 ||
  fail "a message over 4 MiB: $(cat "$TMP/big.out")"
expect_grep "one message of 80000 rows applied" "$TMP/big.out" '^ +1 +t2 +1 +0 +80000 '
scrape "$TMP/metrics_big.txt"
rows=$(metric_int "$TMP/metrics_big.txt" rankd_embedding_updates_total "model=\"big\"" "table=\"t2\"")
expect_eq "rankd_embedding_updates_total of big/t2" "$rows" 80000
admin update --model big --input "$TMP/big.safetensors" --producer_id e2e-big \
  --max_payload_bytes 10 >"$TMP/big_bad.out" 2>&1
expect_eq "--max_payload_bytes 10: exit" "$?" 2
expect_grep "--max_payload_bytes named" "$TMP/big_bad.out" 'max_payload_bytes: must be in \[64, 2\^30\], got 10'
run_bounded 60 "$RANKD" serve --model_root "$MODELS" --update_cpu_priority low >"$TMP/prio.out" 2>&1
expect_eq "rankd serve --update_cpu_priority low: exit" "$?" 2
expect_grep "--update_cpu_priority named" "$TMP/prio.out" \
  '--update_cpu_priority: must be idle or normal, got "low"'
finish
