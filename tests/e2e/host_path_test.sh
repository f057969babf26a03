#!/bin/bash
# End to end: bench/host_path.sh (issue 6's per-request host-cost measurement,
# also run on the GPU machine from a bundle) works on the CPU backend with
# short runs: it exits 0, prints the summary last with (a) server CPU per
# request for each rate and a per-thread split, (b) closed-loop req/s from
# serve_bench and (c) low-load latency with the server's request time, and
# the CPU figures account for the requests the server answered.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/rankload_lib.sh"

SCRIPT="$E2E_ROOT/bench/host_path.sh"
if [[ -x "$E2E_ROOT/bench/serve_bench" ]]; then
  SERVE_BENCH="$E2E_ROOT/bench/serve_bench"
else
  SERVE_BENCH="$E2E_ROOT/bazel-bin/bench/serve_bench"
fi
OUT="$TMP/hostpath"
run_bounded 240 bash "$SCRIPT" --rankd "$RANKD" --rankload "$RANKLOAD" --serve_bench "$SERVE_BENCH" \
  --out "$OUT" --preset mini --num_tables 4 --rates 200,400 --cpu_s 1 --repeat 2 --low_rps 50 \
  --low_s 1 --concurrency 2,4 --closed_s 0.5 --connections 2 --label e2e \
  >"$TMP/stdout.txt" 2>"$TMP/stderr.txt"
RC=$?
cat "$TMP/stderr.txt" "$TMP/stdout.txt" >&2
expect_eq "host_path.sh exit code" "$RC" 0
expect_grep "title" "$TMP/stdout.txt" '^rankd host path: cpu mini tables=4 scale=1 e2e$'
for r in 200 400; do
  expect_grep "(a) at $r" "$TMP/stdout.txt" "^  \(a\) server CPU at $r req/s open loop: median [0-9.]+ us/request \(min [0-9.]+\), [0-9.]+ context switches/request$"
done
expect_grep "per-thread split" "$TMP/stdout.txt" 'by thread: .*rankd-worker [0-9.]+'
expect_grep "(b) closed loop" "$TMP/stdout.txt" '^  \(b\) closed loop, 4 in flight: [0-9]+ req/s, p50 [0-9]+ us, p99 [0-9]+ us, client [0-9]+[.][0-9]{2} cores$'
expect_grep "(c) low load" "$TMP/stdout.txt" '^  \(c\) low load 50 req/s: p50 [0-9]+ us, p99 [0-9]+ us .*server request [0-9]+ us mean'
expect_eq "the summary is printed last" "$(tail -n 1 "$TMP/stdout.txt" | cut -c1-11)" "  reports: "
# The request counts behind (a) are the server's: one run at 200 req/s for 1 s.
N=$("$PY" -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); print(int(b["requests"]-a["requests"]))' \
  "$OUT/cpu_200_1.before.json" "$OUT/cpu_200_1.after.json")
expect_eq "requests counted over cpu_200_1" "$N" 200
finish
