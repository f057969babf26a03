#!/bin/bash
# End to end: rankload's command line. --help documents the flags; every bad
# input fails before any load with exit code 2 (3 when something cannot be
# reached) and a message that starts with the flag's name.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/rankload_lib.sh"

"$RANKLOAD" --help >"$TMP/help.txt" 2>&1
for flag in mode rate arrival concurrency requests model candidates zipf_alpha slo_latency_ms \
  slo_percentile json csv plot_dir metrics_url deadline_ms connections threads response_log \
  model_version version_label; do
  expect_grep "--help lists --$flag" "$TMP/help.txt" "--$flag \("
done

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
gen_requests "$MODELS/mini/1" "$TMP/req.jsonl" --count 3 --candidates 2
printf '{"model": "mini", "numCandidates": 2}\n{"oops"\n' >"$TMP/bad.jsonl"
start_rankd "$MODELS"
DEAD_PORT="$(free_port)"

# expect_usage NAME WANT_CODE MESSAGE_REGEX ARGS...
expect_usage() {
  local name="$1" want="$2" regex="$3"
  shift 3
  run_bounded 60 "$RANKLOAD" "$@" >"$TMP/out.txt" 2>"$TMP/err.txt"
  local rc=$?
  expect_eq "$name: exit code" "$rc" "$want"
  grep -Eq -e "$regex" "$TMP/err.txt" || fail "$name: stderr lacks /$regex/: $(cat "$TMP/err.txt")"
  [[ -s "$TMP/out.txt" ]] && fail "$name: wrote a report: $(head -3 "$TMP/out.txt")"
}

T=(--target "$TARGET")
expect_usage "unknown mode" 2 '^rankload: --mode: must be open, closed or slo' "${T[@]}" --model mini --mode burst
expect_usage "negative rate" 2 '^rankload: --rate: ' "${T[@]}" --model mini --rate=-5
expect_usage "zero rate" 2 '^rankload: --rate: ' "${T[@]}" --model mini --rate 0
expect_usage "bad range" 2 '^rankload: --rate: ' "${T[@]}" --model mini --rate 100:10:5
expect_usage "bad arrival" 2 '^rankload: --arrival: ' "${T[@]}" --model mini --arrival bursty
expect_usage "bad concurrency" 2 '^rankload: --concurrency: ' "${T[@]}" --model mini --mode closed --concurrency 0
expect_usage "bad duration" 2 '^rankload: --duration_s: ' "${T[@]}" --model mini --duration_s 0
expect_usage "bad candidates" 2 '^rankload: --candidates: ' "${T[@]}" --model mini --candidates uniform:9:3
expect_usage "slo without bound" 2 '^rankload: --slo_latency_ms: required' "${T[@]}" --model mini --mode slo
expect_usage "bad percentile" 2 '^rankload: --slo_percentile: ' "${T[@]}" --model mini --slo_percentile 101
expect_usage "no traffic" 2 '^rankload: --requests / --model: ' "${T[@]}"
expect_usage "both traffic kinds" 2 '^rankload: --requests / --model: ' "${T[@]}" --model mini --requests "$TMP/req.jsonl"
expect_usage "missing file" 2 '^rankload: --requests: .*/nope\.jsonl: cannot open' "${T[@]}" --requests "$TMP/nope.jsonl"
expect_usage "bad request line" 2 '^rankload: --requests: .*bad\.jsonl:2: ' "${T[@]}" --requests "$TMP/bad.jsonl"
expect_usage "unknown model" 2 '^rankload: --model: GetModelInfo\("nope".*NOT_FOUND' "${T[@]}" --model nope
expect_usage "unknown shared feature" 2 '^rankload: --shared_features: .*no feature "zzz"' "${T[@]}" --model mini --shared_features zzz
expect_usage "bad model config" 2 '^rankload: --model_config: ' "${T[@]}" --model mini --model_config "$TMP/nope.pbtxt"
expect_usage "unwritable json" 2 '^rankload: --json: cannot write' "${T[@]}" --model mini --json "$TMP/no/such/dir/r.json"
expect_usage "unwritable response log" 2 '^rankload: --response_log: cannot open .*/no/such/dir/calls\.csv' "${T[@]}" --model mini --response_log "$TMP/no/such/dir/calls.csv"
expect_usage "version and label" 2 '^rankload: --version_label: not with --model_version' "${T[@]}" --model mini --model_version 1 --version_label stable
expect_usage "label with replay" 2 '^rankload: --version_label: only for generated requests' "${T[@]}" --requests "$TMP/req.jsonl" --version_label stable
expect_usage "bad metrics url" 2 '^rankload: --metrics_url: .*not an http:// URL' "${T[@]}" --model mini --metrics_url "localhost:$METRICS_PORT"
expect_usage "unreachable metrics" 3 '^rankload: --metrics_url: .*cannot connect' "${T[@]}" --model mini --metrics_url "http://127.0.0.1:$DEAD_PORT/metrics"
expect_usage "unreachable target" 3 '^rankload: --target: cannot connect .* \(is rankd serving at' \
  --target "127.0.0.1:$DEAD_PORT" --connect_timeout_ms 500 --model mini
expect_usage "positional argument" 2 '^rankload: unexpected argument "extra"' "${T[@]}" --model mini extra

# --model_config is read for typical_ids_per_bag.
run_bounded 60 "$RANKLOAD" "${T[@]}" --model mini --model_config "$MODELS/mini/1/model.pbtxt" \
  --rate 100 --warmup_s 0 --duration_s 0.3 --quiet >"$TMP/ok.txt" 2>"$TMP/ok.err"
expect_eq "--model_config run: exit code" "$?" 0
expect_grep "--model_config run: no errors" "$TMP/ok.txt" '^  errors     none$'

stop_rankd
finish
