#!/bin/bash
# End to end: bench/slo_report.sh (the GPU machine's SLO report) works, run
# here on the CPU backend with the kaggle preset at a tiny scale and short
# probes: it exits 0, prints the table last (low load, both SLO searches with
# their confirmation runs) and leaves JSON / CSV / PNG under --out and no model
# there.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/rankload_lib.sh"

SCRIPT="$E2E_ROOT/bench/slo_report.sh"
OUT="$TMP/report"
run_bounded 240 bash "$SCRIPT" --rankd "$RANKD" --rankload "$RANKLOAD" --out "$OUT" --backend cpu \
  --scale 0.0005 --low_rps 50 --low_s 1 --start_rps_1 200 --start_rps_256 4 --step_s 0.5 \
  --warmup_s 0.2 --confirm_s 1 --precision 0.25 --connections 2 >"$TMP/stdout.txt" 2>"$TMP/stderr.txt"
RC=$?
cat "$TMP/stderr.txt" "$TMP/stdout.txt" >&2
expect_eq "slo_report.sh exit code" "$RC" 0
expect_grep "table title" "$TMP/stdout.txt" '^rankd SLO report: kaggle preset \(scale 0.0005\), --backend cpu$'
expect_grep "low-load row" "$TMP/stdout.txt" '^  1 candidate, low load +50 req/s open loop +p50 [0-9.]+ ms, p99 [0-9.]+ ms'
expect_grep "1-candidate SLO row" "$TMP/stdout.txt" '^  1 candidate, p99 <= 5 ms +([0-9.]+ k? ?req/s = |NOT MET)'
expect_grep "256-candidate SLO row" "$TMP/stdout.txt" '^  256 candidates, p99 <= 10 ms +([0-9.]+ k? ?req/s = .* candidates/s|NOT MET)'
expect_eq "the table is printed last" "$(tail -n 1 "$TMP/stdout.txt" | cut -c1-11)" "  reports: "
for f in low_load_1 slo_1 slo_256; do
  [[ -s "$OUT/$f.json" && -s "$OUT/$f.csv" ]] || fail "$f.json / $f.csv missing"
  "$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' "$OUT/$f.json" || fail "$f.json does not parse"
  [[ -s "$OUT/plots/$f/latency_over_time.png" ]] || fail "plots/$f/latency_over_time.png missing"
done
[[ -s "$OUT/plots/slo_1/latency_vs_throughput.png" ]] || fail "plots/slo_1/latency_vs_throughput.png missing"
expect_eq "slo_1 is an SLO search" "$(rj "$OUT/slo_1.json" 'r["slo"]["latency_bound_ms"]')" 5.0
expect_eq "slo_256 sends 256 candidates" "$(rj "$OUT/slo_256.json" 'r["steps"][0]["mean_candidates"]')" 256.0
expect_eq "no model under --out" "$(find "$OUT" -name 'weights.safetensors' | wc -l)" 0
expect_eq "summary.txt = the table" "$(tail -n 1 "$OUT/summary.txt")" "$(tail -n 1 "$TMP/stdout.txt")"
finish
