#!/bin/bash
# End to end: explicit model control through rankctl (the admin API).
#   - --model_control explicit --load_model mini: only mini loads (both of its
#     versions: serving.pbtxt says all); kaggle waits for `rankctl load`;
#   - rankctl label moves "stable" from version 1 to 2 under an open-loop load
#     sent with --version_label stable: zero failures, answers by version 1
#     before the move and by version 2 after it;
#   - rankctl unload with requests in flight: every admitted request is
#     answered OK with the scores of `rankd score`; later ones get NOT_FOUND /
#     UNAVAILABLE; the model's health turns NOT_SERVING;
#   - errors: unknown model (NOT_FOUND), a label on a version that is not
#     READY (FAILED_PRECONDITION), both exit 1 naming what exists.
source "$(dirname "$0")/lib.sh"
RANKLOAD="$E2E_ROOT/loadtest/rankload"
[[ -x "$RANKLOAD" ]] || RANKLOAD="$E2E_ROOT/bazel-bin/loadtest/rankload"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini --seed 1
run_bounded 120 "$RANKD" gen-model --preset mini --name mini --seed 2 --out "$MODELS/mini/2" \
  2>"$TMP/gen2.err" || die "gen-model v2: $(cat "$TMP/gen2.err")"
echo 'version_policy { all {} }' >"$MODELS/mini/serving.pbtxt"
gen_model "$MODELS" kaggle --preset kaggle --scale 0.001
# One request per batch and one worker: requests in flight wait in the queue.
# Deadline admission off: every request must be admitted until the unload
# (as in sigterm_drain_test, a stall on a loaded machine could otherwise
# have one refused as overloaded).
set_model_options "$MODELS/kaggle/1" \
  "batching { max_batch_candidates: 256 disable_deadline_admission: true }
   instances { workers_per_device: 1 }"
gen_requests "$MODELS/kaggle/1" "$TMP/kreq1.jsonl" --count 25 --candidates 256 --seed 51
reference_scores "$MODELS/kaggle/1" "$TMP/kreq1.jsonl" "$TMP/kwant1.jsonl"
: >"$TMP/kreq.jsonl"
: >"$TMP/kwant.jsonl"
for _ in $(seq 12); do
  cat "$TMP/kreq1.jsonl" >>"$TMP/kreq.jsonl"
  cat "$TMP/kwant1.jsonl" >>"$TMP/kwant.jsonl"
done
TOTAL=$(wc -l <"$TMP/kreq.jsonl")

start_rankd "$MODELS" --model_control explicit --load_model mini --admin_port 0
admin() { run_bounded 120 "$RANKCTL" "$@" --admin_target "$ADMIN_TARGET" --connect_timeout_ms 5000; }

admin models >"$TMP/models.txt" || fail "rankctl models: $(cat "$TMP/models.txt")"
expect_grep "mini 1 READY" "$TMP/models.txt" '^mini +1 +READY'
expect_grep "mini 2 READY" "$TMP/models.txt" '^mini +2 +READY'
grep -Eq '^kaggle +1 +READY' "$TMP/models.txt" && fail "kaggle loaded without being asked"

admin load --model nope >"$TMP/nope.out" 2>&1
expect_eq "load of an unknown model: exit" "$?" 1
expect_grep "NOT_FOUND names the models" "$TMP/nope.out" 'NOT_FOUND.*kaggle'
admin label --model mini --label stable --version 1 >"$TMP/label.out" 2>&1 ||
  fail "label stable=1: $(cat "$TMP/label.out")"
admin label --model mini --label stable --version 7 >"$TMP/label7.out" 2>&1
expect_eq "label on a version that is not READY: exit" "$?" 1
expect_grep "FAILED_PRECONDITION" "$TMP/label7.out" 'FAILED_PRECONDITION'

# Move "stable" under load.
now_ms() { date +%s%3N; }
run_bounded 60 "$RANKLOAD" --target "$TARGET" --model mini --version_label stable --mode open \
  --rate 200 --duration_s 6 --warmup_s 0 --deadline_ms 5000 --quiet \
  --response_log "$TMP/label_log.csv" >"$TMP/rankload.out" 2>&1 &
LOAD_PID=$!
track_pid "$LOAD_PID"
sleep 2.5
MOVE_START_MS=$(now_ms)
admin label --model mini --label stable --version 2 >"$TMP/label2.out" 2>&1 ||
  fail "label stable=2: $(cat "$TMP/label2.out")"
MOVE_END_MS=$(now_ms)
wait "$LOAD_PID" || fail "rankload: $(tail -3 "$TMP/rankload.out")"
"$PY" - "$TMP/label_log.csv" "$MOVE_START_MS" "$MOVE_END_MS" <<'PYEOF' || fail "label move under load"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
start, end = int(sys.argv[2]) * 1000, int(sys.argv[3]) * 1000
bad = [r for r in rows if r["code"] != "OK"]
assert not bad, "%d failed calls, e.g. %r" % (len(bad), bad[:3])
early = [r for r in rows if int(r["done_unix_us"]) < start and r["version"] != "1"]
late = [r for r in rows if int(r["sent_unix_us"]) > end and r["version"] != "2"]
assert not early and not late, (early[:3], late[:3])
v1 = sum(r["version"] == "1" for r in rows)
v2 = sum(r["version"] == "2" for r in rows)
assert v1 > 50 and v2 > 50 and len(rows) > 800, (len(rows), v1, v2)
print("label move: %d calls, %d by v1, %d by v2, 0 failed" % (len(rows), v1, v2), file=sys.stderr)
PYEOF

# Unload with requests in flight.
admin load --model kaggle >"$TMP/kload.out" 2>&1 || die "load kaggle: $(cat "$TMP/kload.out")"
rankctl health --service kaggle >/dev/null 2>&1 || fail "kaggle not SERVING after load"
rankctl score --input "$TMP/kreq.jsonl" --output "$TMP/kgot.jsonl" --concurrency 16 \
  --deadline_ms 60000 2>"$TMP/kscore.err" &
CTL_PID=$!
track_pid "$CTL_PID"
OK_SO_FAR=0
Q=0
for ((i = 0; i < 400; i++)); do
  scrape "$TMP/metrics_before.txt"
  OK_SO_FAR="$(metric_int "$TMP/metrics_before.txt" rankd_requests_total 'model="kaggle"' 'version="1"' 'code="OK"')"
  Q="$(metric_int "$TMP/metrics_before.txt" rankd_queue_requests 'model="kaggle"')"
  [[ -n "$OK_SO_FAR" && "$OK_SO_FAR" -ge 40 && -n "$Q" && "$Q" -ge 4 ]] && break
  sleep 0.02
done
[[ -n "$OK_SO_FAR" && "$OK_SO_FAR" -ge 40 ]] || die "load did not get going: $OK_SO_FAR OK"
M=$OK_SO_FAR
log "before the unload: $M OK, $Q queued"
admin unload --model kaggle >"$TMP/unload.out" 2>&1 || fail "unload kaggle: $(cat "$TMP/unload.out")"
for ((i = 0; i < 600; i++)); do kill -0 "$CTL_PID" 2>/dev/null || break; sleep 0.1; done
wait "$CTL_PID"
check_admitted_answered "the unload" "$TMP/kscore.err" "$TMP/kgot.jsonl" "$TMP/kwant.jsonl" \
  "$TOTAL" "$M" "$Q" NOT_FOUND UNAVAILABLE
admin models --model kaggle >"$TMP/kmodels.txt" 2>&1
expect_grep "kaggle 1 UNLOADED" "$TMP/kmodels.txt" '^kaggle +1 +UNLOADED'
rankctl health --service kaggle >/dev/null 2>&1 && fail "kaggle still SERVING after its unload"

stop_rankd TERM
expect_eq "rankd exit status" "$RANKD_RC" 0
finish
