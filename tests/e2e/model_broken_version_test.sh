#!/bin/bash
# End to end: publishing a broken version (truncated weights) leaves the
# current version serving; ListModels shows the broken one FAILED with the
# file and the reason; rankd_model_loads_total{result="failed"} counts it;
# it is not retried while its files stay the same; republishing fixed files
# loads it and the swap happens. A broken serving.pbtxt keeps the last good
# policy and shows its error.
source "$(dirname "$0")/lib.sh"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini --seed 1
run_bounded 120 "$RANKD" gen-model --preset mini --name mini --seed 2 --out "$TMP/stage/2" \
  2>"$TMP/gen2.err" || die "gen-model v2: $(cat "$TMP/gen2.err")"
gen_requests "$MODELS/mini/1" "$TMP/req.jsonl" --count 10 --candidates 4 --seed 5
reference_scores "$MODELS/mini/1" "$TMP/req.jsonl" "$TMP/want1.jsonl"

start_rankd "$MODELS" --model_control poll --repository_poll_s 1 --admin_port 0

cp -r "$TMP/stage/2" "$MODELS/mini/.2.tmp"
truncate -s 100 "$MODELS/mini/.2.tmp/weights.safetensors"
mv "$MODELS/mini/.2.tmp" "$MODELS/mini/2"
lifecycle wait --target "$ADMIN_TARGET" --model mini --version 2 --state FAILED --timeout_s 30 \
  >/dev/null || die "the broken version was not marked FAILED"
lifecycle list --target "$ADMIN_TARGET" --model mini >"$TMP/list.json"
expect_grep "reason names the file" "$TMP/list.json" '"reason": ".*2/weights.safetensors'
rankctl score --input "$TMP/req.jsonl" --output "$TMP/got1.jsonl" 2>"$TMP/score.err" ||
  fail "rankctl score: $(cat "$TMP/score.err")"
compare_scores "version 1 still serving" "$TMP/want1.jsonl" "$TMP/got1.jsonl"
sleep 3  # three polls: unchanged files are not retried
scrape "$TMP/metrics.txt"
expect_eq "failed loads" "$(metric_int "$TMP/metrics.txt" rankd_model_loads_total 'model="mini"' 'result="failed"')" 1
expect_eq "failed versions" "$(metric_int "$TMP/metrics.txt" rankd_model_versions 'model="mini"' 'state="failed"')" 1
expect_eq "failed load logged once" "$(grep -c 'model mini version 2 FAILED' "$RANKD_LOG")" 1

# A bad serving.pbtxt: the model keeps its policy, the error shows.
echo 'version_policy { latest { num_versions: "x" } }' >"$MODELS/mini/serving.pbtxt"
for ((i = 0; i < 50; i++)); do
  lifecycle list --target "$ADMIN_TARGET" --model mini >"$TMP/list.json"
  grep -q '"config_error"' "$TMP/list.json" && break
  sleep 0.1
done
expect_grep "serving.pbtxt error shown" "$TMP/list.json" '"config_error": ".*serving.pbtxt:1:'
rm "$MODELS/mini/serving.pbtxt"

# Fixed files: loaded on the next poll, and they take over.
cp "$TMP/stage/2/weights.safetensors" "$MODELS/mini/2/weights.safetensors"
lifecycle wait --target "$ADMIN_TARGET" --model mini --version 2 --state READY --timeout_s 30 \
  >/dev/null || fail "the fixed version did not load"
gen_requests "$TMP/stage/2" "$TMP/req2.jsonl" --count 10 --candidates 4 --seed 5
reference_scores "$TMP/stage/2" "$TMP/req2.jsonl" "$TMP/want2.jsonl"
rankctl score --input "$TMP/req2.jsonl" --output "$TMP/got2.jsonl" 2>"$TMP/score.err" ||
  fail "rankctl score: $(cat "$TMP/score.err")"
compare_scores "fixed version 2 serving" "$TMP/want2.jsonl" "$TMP/got2.jsonl"
scrape "$TMP/metrics.txt"
expect_eq "successful loads" "$(metric_int "$TMP/metrics.txt" rankd_model_loads_total 'model="mini"' 'result="success"')" 2

stop_rankd TERM
expect_eq "rankd exit status" "$RANKD_RC" 0
finish
