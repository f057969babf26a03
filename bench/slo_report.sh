#!/usr/bin/env bash
# rankd's SLO report for the Criteo-Kaggle preset, measured by rankload:
#   1. p50 / p99 at low load: 1-candidate requests, open loop at --low_rps;
#   2. the highest rate with p99 <= 5 ms for 1-candidate requests (SLO search),
#      then a confirmation run at that rate for --confirm_s;
#   3. the highest candidates/s with p99 <= 10 ms for 256-candidate requests
#      (SLO search on the request rate), then a confirmation run.
# Writes JSON / CSV / PNG (PNG when gnuplot is installed; the gnuplot scripts
# otherwise) under OUT and prints a short table last (also OUT/summary.txt).
#
# Needs no Bazel: the binaries are arguments, so it runs from a bundle on a GPU
# machine (a binary in BUNDLE/bin finds its libraries in BUNDLE/lib).
#
#   bench/slo_report.sh --rankd BIN/rankd --rankload BIN/rankload --out DIR \
#       [--backend cuda|cpu|auto] [--scale F] [--step_s S] [--warmup_s S] ...
#
# The model (full scale: 2.2 GB) is generated under --work (default: a
# temporary directory, removed at exit), never under --out. Defaults take about
# 3 minutes on an H100 machine. `--help` lists every option.
set -euo pipefail
bench_name=slo_report.sh
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  bench_print_header 19
  cat <<'EOF'
Options (defaults in brackets):
  --rankd PATH          rankd binary (required)
  --rankload PATH       rankload binary (required)
  --out DIR             reports go here (required; created)
  --backend B           rankd serve --backend: cuda | cpu | auto [cuda]
  --scale F             rankd gen-model --scale: kaggle table rows x F [1]
  --work DIR            where the model is generated [a temporary directory]
  --low_rps R           low-load rate, 1-candidate requests [100]
  --low_s S             low-load measured seconds [10]
  --start_rps_1 R       SLO search start, 1-candidate requests [5000]
  --start_rps_256 R     SLO search start, 256-candidate requests [500]
  --p99_ms_1 MS         latency bound, 1 candidate [5]
  --p99_ms_256 MS       latency bound, 256 candidates [10]
  --step_s S            measured seconds per SLO probe [3]
  --warmup_s S          warm-up seconds before each probe / run [1]
  --confirm_s S         confirmation run at each found rate, 0 = none [10]
  --precision F         SLO search: stop at (fail - pass) / pass <= F [0.05]
  --threads N           rankload sender threads, 0 = cores / 4 [0]
  --connections N       rankload gRPC connections [8]
  --gpu_workers N       rankd serve --gpu_workers (0 = default) [0]
  --serve_flags "F..."  further rankd serve flags, e.g. "--worker_spin_us 200" [none]
  --server_cpus LIST    taskset -c LIST for rankd (e.g. 0-15), "" = no pinning [""]
  --client_cpus LIST    taskset -c LIST for rankload (e.g. 16-31) [""]
EOF
}

rankd="" rankload="" out="" backend=cuda scale=1 work=""
low_rps=100 low_s=10 start1=5000 start256=500 p99_1=5 p99_256=10
step_s=3 warmup_s=1 confirm_s=10 precision=0.05 threads=0 connections=8 gpu_workers=0
extra_serve_flags="" server_cpus="" client_cpus=""
# --option VALUE sets the variable of the same name ("option:variable" otherwise).
options="rankd rankload out backend scale work low_rps low_s start_rps_1:start1
  start_rps_256:start256 p99_ms_1:p99_1 p99_ms_256:p99_256 step_s warmup_s confirm_s precision
  threads connections gpu_workers serve_flags:extra_serve_flags server_cpus client_cpus"
bench_parse_options "$options" "$@"
bench_require_binaries "$rankd" "$rankload" "$out"
bench_check_backend "$backend"
bench_pin server_pin --server_cpus "$server_cpus"
bench_pin client_pin --client_cpus "$client_cpus"

bench_binaries rankd rankload

bench_dirs "$out" "$work"

# --- the model and the server -------------------------------------------------
model_dir="$work/models/kaggle/1"
if [ ! -f "$model_dir/model.pbtxt" ]; then
  say "generating the kaggle preset at scale $scale into $model_dir"
  "$rankd" gen-model --preset kaggle --scale "$scale" --out "$model_dir" >&2
fi
"$rankd" inspect --model "$model_dir" >"$out/model_inspect.txt" 2>&1 || true
ports="$work/ports"
serve_flags=(--model_root "$work/models" --backend "$backend" --host 127.0.0.1 --grpc_port 0
  --metrics_port 0 --admin_port -1 --http_port -1 --port_file "$ports" --log_level warn)
[ "$gpu_workers" != 0 ] && serve_flags+=(--gpu_workers "$gpu_workers")
# shellcheck disable=SC2206  # split on purpose: a list of flags
[ -n "$extra_serve_flags" ] && serve_flags+=($extra_serve_flags)
say "starting rankd serve ${serve_flags[*]}"
bench_start_rankd "$out/rankd.log" "$ports" "${server_pin[@]}" "$rankd" serve "${serve_flags[@]}"

common=(--target "127.0.0.1:$grpc" --model kaggle --model_config "$model_dir/model.pbtxt"
  --metrics_url "http://127.0.0.1:$metrics/metrics" --threads "$threads"
  --connections "$connections" --deadline_ms 1000)

# run NAME ARGS...: one rankload run, reports under $out/NAME.*; exit 4 (SLO
# not met) is a result, not a failure.
run() {
  local name=$1 rc=0
  shift
  say "rankload $name: $*"
  "${client_pin[@]}" "$rankload" "${common[@]}" "$@" --label "kaggle $name" --json "$out/$name.json" \
    --csv "$out/$name.csv" --plot_dir "$out/plots/$name" >"$out/$name.txt" 2>"$out/$name.log" || rc=$?
  if [ "$rc" != 0 ] && [ "$rc" != 4 ]; then
    echo "slo_report.sh: rankload $name failed (exit $rc):" >&2
    tail -5 "$out/$name.log" >&2
    exit 1
  fi
  grep -E "^(  latency|  highest|  NOT MET|  WARNING)" "$out/$name.txt" >&2 || true
}

# best_rate NAME: the SLO search's answer ("" when not met).
best_rate() {
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["slo"]; print(s["best_rps"] if s["found"] else "")' \
    "$out/$1.json"
}

# --- 1. low load ------------------------------------------------------------------
run low_load_1 --candidates 1 --pool_size 1000 --rate "$low_rps" --warmup_s "$warmup_s" \
  --duration_s "$low_s"

# --- 2. 1 candidate: highest rate at p99 <= 5 ms -------------------------------------
slo=(--mode slo --slo_percentile 99 --slo_precision "$precision" --warmup_s "$warmup_s"
  --duration_s "$step_s" --interval_s 1)
run slo_1 --candidates 1 --pool_size 1000 --rate "$start1" --slo_latency_ms "$p99_1" "${slo[@]}"
best1=$(best_rate slo_1)
if [ -n "$best1" ] && [ "$confirm_s" != 0 ]; then
  run confirm_1 --candidates 1 --pool_size 1000 --rate "$best1" --slo_latency_ms "$p99_1" \
    --warmup_s "$warmup_s" --duration_s "$confirm_s"
fi

# --- 3. 256 candidates: highest candidates/s at p99 <= 10 ms -------------------------
run slo_256 --candidates 256 --pool_size 200 --rate "$start256" --slo_latency_ms "$p99_256" "${slo[@]}"
best256=$(best_rate slo_256)
if [ -n "$best256" ] && [ "$confirm_s" != 0 ]; then
  run confirm_256 --candidates 256 --pool_size 200 --rate "$best256" --slo_latency_ms "$p99_256" \
    --warmup_s "$warmup_s" --duration_s "$confirm_s"
fi

say "done in $((SECONDS - bench_t0)) s; stopping rankd"
kill -TERM "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
pid=""

# --- the table ------------------------------------------------------------------------
python3 - "$out" "$backend" "$scale" "$server_cpus" "$client_cpus" >"$out/summary.txt" <<'PY'
import json, os, sys
out, backend, scale, server_cpus, client_cpus = sys.argv[1:6]
def load(name):
    p = os.path.join(out, name + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
def ms(us):
    return f"{us / 1000:.3f} ms" if us < 10000 else f"{us / 1000:.1f} ms"
def rate(x):
    return f"{x / 1e6:.2f} M" if x >= 1e6 else f"{x / 1e3:.1f} k" if x >= 1e4 else f"{x:.0f}"
low = load("low_load_1")
rows = []
if low:
    s = low["steps"][0]
    rows.append(("1 candidate, low load", f"{s['target_rps']:.0f} req/s open loop",
                 f"p50 {ms(s['latency_us']['p50'])}, p99 {ms(s['latency_us']['p99'])}",
                 f"server: request {ms(s['server_window']['mean_request_us']) if s['server_window'] else '-'} mean"))
for name, cands in (("1", 1), ("256", 256)):
    search, confirm = load("slo_" + name), load("confirm_" + name)
    if not search:
        continue
    slo = search["slo"]
    what = f"{cands} candidate{'s' if cands > 1 else ''}, p{slo['percentile']:g} <= {slo['latency_bound_ms']:g} ms"
    if not slo["found"]:
        rows.append((what, "NOT MET at any rate tried", slo["stop_reason"], ""))
        continue
    best = search["steps"][slo["best_step"]]
    got = f"{rate(slo['best_rps'])} req/s = {rate(best['candidates_per_s'])} candidates/s"
    lat = f"probe p99 {ms(best['latency_us']['p99'])} ({slo['steps']} probes)"
    conf = ""
    if confirm:
        c = confirm["steps"][0]
        conf = (f"{c['duration_s']:g} s at that rate: achieved {rate(c['achieved_rps'])} req/s, "
                f"p50 {ms(c['latency_us']['p50'])}, p99 {ms(c['latency_us']['p99'])}, "
                f"errors {c['errors']}, {'PASS' if c.get('slo_pass') else 'FAIL'}")
        if c["server_window"]:
            sw = c["server_window"]
            conf += (f"; server queue {ms(sw['mean_queue_us'])}, compute {ms(sw['mean_compute_us'])}"
                     f"/batch, batch {sw['mean_batch_candidates']:.0f} candidates")
    behind = [st["target_rps"] for st in search["steps"]
              if st.get("slo_pass") is False and st["client_behind"]]
    if behind:
        conf += ("\n" + " " * 37 if conf else "") + (
            f"NOTE: failing probes at {', '.join(rate(x) for x in behind)} req/s had the client "
            f"behind its schedule: the limit may be rankload's (try --threads / --connections)")
    rows.append((what, got, lat, conf))
backend_seen = (low or {}).get("settings", {}).get("traffic", "")
print(f"rankd SLO report: kaggle preset (scale {scale}), --backend {backend}")
print(f"  traffic: {backend_seen}")
if server_cpus or client_cpus:
    print(f"  CPUs: rankd {server_cpus or 'any'}, rankload {client_cpus or 'any'} (taskset)")
for r in rows:
    print(f"  {r[0]:<34} {r[1]:<44} {r[2]}")
    if r[3]:
        print(f"  {'':<34} {r[3]}")
print(f"  reports: {out}/*.json, *.csv, plots/*/")
PY
cat "$out/summary.txt"
