#!/bin/bash
# End to end (CPU backend): a new model version goes live under load with zero
# failed requests (--model_control poll, 1 s polls).
#   - rankload sends an open-loop stream the whole time (--response_log: one
#     line per call with its send time and the version that answered);
#   - version 2 is published by rename in the middle of the run
#     (.2.tmp -> 2, the publishing protocol), later version 1's directory is
#     removed;
#   - every call is OK; calls answered before version 2 was READY name
#     version 1, calls sent more than a poll period after it name version 2
#     (lifecycle_util.py swap);
#   - version 2's scores equal `rankd score` on its files bit for bit;
#   - ListModels: version 1 gone (or UNLOADED), version 2 READY; metrics count
#     two successful loads and one READY version;
#   - the p99 from publication to one second after the unload and the p99
#     before publication are logged (bench notes).
source "$(dirname "$0")/lib.sh"
RANKLOAD="$E2E_ROOT/loadtest/rankload"
[[ -x "$RANKLOAD" ]] || RANKLOAD="$E2E_ROOT/bazel-bin/loadtest/rankload"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini --seed 1
run_bounded 120 "$RANKD" gen-model --preset mini --name mini --seed 2 --out "$TMP/stage/2" \
  2>"$TMP/gen2.err" || die "gen-model v2: $(cat "$TMP/gen2.err")"
gen_requests "$TMP/stage/2" "$TMP/req.jsonl" --count 20 --candidates 16 --seed 7
reference_scores "$TMP/stage/2" "$TMP/req.jsonl" "$TMP/want2.jsonl"

start_rankd "$MODELS" --model_control poll --repository_poll_s 1 --admin_port 0
admin_stubs "$TMP/admin_stubs"

now_ms() { date +%s%3N; }
run_bounded 120 "$RANKLOAD" --target "$TARGET" --model mini --mode open --rate 300 \
  --duration_s 14 --warmup_s 0 --deadline_ms 5000 --quiet \
  --response_log "$TMP/responses.csv" --json "$TMP/load.json" >"$TMP/rankload.out" 2>&1 &
LOAD_PID=$!
track_pid "$LOAD_PID"
sleep 4

PUBLISH_MS=$(now_ms)
cp -r "$TMP/stage/2" "$MODELS/mini/.2.tmp"
mv "$MODELS/mini/.2.tmp" "$MODELS/mini/2"
READY_MS=$(lifecycle wait --target "$ADMIN_TARGET" --model mini --version 2 --state READY \
  --timeout_s 30) || die "version 2 never became READY"
SWAPPED_MS=$(lifecycle wait --target "$ADMIN_TARGET" --model mini --version 1 \
  --state UNLOADED --timeout_s 30) || die "version 1 was never unloaded"
log "published at $PUBLISH_MS, v2 READY at $READY_MS (+$((READY_MS - PUBLISH_MS)) ms), v1 unloaded at $SWAPPED_MS"
sleep 2
rm -rf "$MODELS/mini/1"

wait "$LOAD_PID"
LOAD_RC=$?
[[ "$LOAD_RC" -eq 0 ]] || fail "rankload exited $LOAD_RC: $(tail -5 "$TMP/rankload.out")"
lifecycle swap --log "$TMP/responses.csv" --ready_ms "$READY_MS" --publish_ms "$PUBLISH_MS" \
  --swapped_ms "$((SWAPPED_MS + 1000))" --poll_s 1 --min_calls 2000 >"$TMP/swap.json" ||
  fail "responses around the swap (see above)"
log "swap: $(cat "$TMP/swap.json")"

# Version 2 serves the scores of its files.
rankctl score --input "$TMP/req.jsonl" --output "$TMP/got2.jsonl" 2>"$TMP/score.err" ||
  fail "rankctl score: $(cat "$TMP/score.err")"
compare_scores "version 2 scores" "$TMP/want2.jsonl" "$TMP/got2.jsonl"
expect_eq "responses naming version 2" "$(grep -c '"version": *"2"' "$TMP/got2.jsonl")" 20

# Version 1's directory is gone: after a poll it leaves the list.
for ((i = 0; i < 50; i++)); do
  lifecycle list --target "$ADMIN_TARGET" --model mini >"$TMP/list.json"
  grep -q '"version": "1"' "$TMP/list.json" || break
  sleep 0.1
done
"$PY" - "$TMP/list.json" <<'PYEOF' || fail "ListModels after the swap: $(cat "$TMP/list.json")"
import json, sys
m = json.load(open(sys.argv[1]))["models"][0]
states = {int(v["version"]): v["state"] for v in m["versions"]}
assert states.get(2) == "READY", states
assert states.get(1, "UNLOADED") == "UNLOADED", states
PYEOF

scrape "$TMP/metrics.txt"
expect_eq "successful loads" "$(metric_int "$TMP/metrics.txt" rankd_model_loads_total 'model="mini"' 'result="success"')" 2
expect_eq "ready versions" "$(metric_int "$TMP/metrics.txt" rankd_model_versions 'model="mini"' 'state="ready"')" 1
expect_eq "version 1 request series removed" "$(metric "$TMP/metrics.txt" rankd_requests_total 'model="mini"' 'version="1"' 'code="OK"')" ""
[[ -n "$(metric "$TMP/metrics.txt" rankd_requests_total 'model="mini"' 'version="2"' 'code="OK"')" ]] ||
  fail "no rankd_requests_total{version=\"2\"}"
rankctl health --service mini >"$TMP/health.out" 2>&1 || fail "health of mini after the swap: $(cat "$TMP/health.out")"

stop_rankd TERM
expect_eq "rankd exit status" "$RANKD_RC" 0
finish
