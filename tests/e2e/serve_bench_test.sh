#!/bin/bash
# End to end: bench/serve_bench against the real rankd (CPU backend). Every
# --rpc mode (score, with --serialize_per_call too, score_sync, model_info,
# model_info_async, health) sends calls and counts them answered with no
# error; calls the server refuses
# (a model it does not serve) are counted as errors, not as latencies, in the
# callback and the blocking modes; the line ends with the client's own CPU;
# an unknown --rpc and out-of-range numbers are refused, naming the flag.
source "$(dirname "$0")/lib.sh"

if [[ -x "$E2E_ROOT/bench/serve_bench" ]]; then
  SERVE_BENCH="$E2E_ROOT/bench/serve_bench"
else
  SERVE_BENCH="$E2E_ROOT/bazel-bin/bench/serve_bench"
fi
MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
gen_requests "$MODELS/mini/1" "$TMP/reqs.jsonl" --count 3 --candidates 2 --seed 7
sed 's/"model": *"mini"/"model":"nope"/' "$TMP/reqs.jsonl" >"$TMP/nope.jsonl"
expect_grep "the unserved model's requests name it" "$TMP/nope.jsonl" '"model":"nope"'
start_rankd "$MODELS"

# bench RPC REQUESTS [FLAGS...]: serve_bench's result line (stdout) for 0.5 s
# at 2 in flight.
bench() {
  run_bounded 60 "$SERVE_BENCH" --target "$TARGET" --requests "$2" --rpc "$1" --concurrency 2 \
    --duration_s 0.5 --warmup_s 0.1 --label "e2e $1" "${@:3}" 2>"$TMP/bench.err"
}

for rpc in score score_sync model_info model_info_async health; do
  bench "$rpc" "$TMP/reqs.jsonl" >"$TMP/$rpc.out"
  expect_eq "$rpc: exit code" "$?" 0
  expect_grep "$rpc: calls answered" "$TMP/$rpc.out" "^e2e $rpc +conc +2 +[1-9][0-9]* req/s .* errors 0 +client_cpu [0-9]+[.][0-9]{2} cores$"
done
# Score with the request serialized on every call (the default sends bytes
# serialized once): the same answers.
bench score "$TMP/reqs.jsonl" --serialize_per_call >"$TMP/score_per_call.out"
expect_eq "score --serialize_per_call: exit code" "$?" 0
expect_grep "score --serialize_per_call: calls answered" "$TMP/score_per_call.out" \
  "^e2e score +conc +2 +[1-9][0-9]* req/s .* errors 0 +client_cpu [0-9]+[.][0-9]{2} cores$"
bench score "$TMP/nope.jsonl" --serialize_per_call >"$TMP/score_per_call.nope.out"
expect_grep "score --serialize_per_call, unserved model: errors counted" \
  "$TMP/score_per_call.nope.out" "^e2e score +conc +2 +0 req/s .* errors [1-9][0-9]* "
# A client that sent calls for 0.5 s spent some CPU doing it.
expect_grep "score: the client's CPU is measured" "$TMP/score.out" " client_cpu ([1-9][0-9]*[.][0-9]{2}|0[.]0[1-9]|0[.][1-9][0-9]) cores$"
for rpc in score score_sync model_info model_info_async; do
  bench "$rpc" "$TMP/nope.jsonl" >"$TMP/$rpc.nope.out"
  expect_eq "$rpc, unserved model: exit code" "$?" 0
  expect_grep "$rpc, unserved model: errors counted, no latency" "$TMP/$rpc.nope.out" \
    "^e2e $rpc +conc +2 +0 req/s .* errors [1-9][0-9]* +client_cpu [0-9]+[.][0-9]{2} cores$"
done

bench score_sync "$TMP/reqs.jsonl" --serialize_per_call >/dev/null
expect_eq "--serialize_per_call outside score: exit code" "$?" 2
expect_grep "--serialize_per_call outside score: named" "$TMP/bench.err" \
  '^serve_bench: --serialize_per_call: only with --rpc score .*got --rpc score_sync$'

bench no_such_rpc "$TMP/reqs.jsonl" >/dev/null
expect_eq "unknown --rpc: exit code" "$?" 2
expect_grep "unknown --rpc: named" "$TMP/bench.err" '^serve_bench: --rpc: .*got "no_such_rpc"$'

# Out-of-range numbers are refused, naming the flag (--concurrency 0 used to
# wait forever for answers that were never asked for).
for bad in "--concurrency 0" "--connections 0" "--duration_s 0" "--warmup_s -1" "--duration_s nan"; do
  flag=${bad%% *}
  # shellcheck disable=SC2086  # the flag and its value are two words
  run_bounded 20 "$SERVE_BENCH" --target "$TARGET" --requests "$TMP/reqs.jsonl" $bad \
    >/dev/null 2>"$TMP/bad.err"
  expect_eq "$bad: exit code" "$?" 2
  expect_grep "$bad: named" "$TMP/bad.err" "^serve_bench: $flag: must be "
done

stop_rankd
expect_eq "rankd exit code" "$RANKD_RC" 0
finish
