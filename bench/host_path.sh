#!/usr/bin/env bash
# rankd's per-request host cost (issue 6): what one small request costs the
# server outside the model's compute. For 1-candidate requests (or --candidates N) on a small model
# it reports
#   (a) server CPU microseconds per request: the rankd process's utime + stime
#       (/proc/PID/stat) over an open-loop run at a fixed rate, divided by the
#       requests the server answered meanwhile (rankd_requests_total). The rate
#       is fixed so the client's load is the same for every build compared;
#       a per-thread-name breakdown shows where the CPU went;
#   (b) the highest closed-loop rate (serve_bench, several concurrencies), with
#       the client's own CPU (a client near its limit measures itself);
#   (c) p50 / p99 at low load (rankload open loop) beside the server's own mean
#       request / queue / compute times from /metrics.
# Writes everything under OUT and prints a summary last (also OUT/summary.txt).
#
# Needs no Bazel: the binaries are arguments, so it runs from a bundle on a GPU
# machine (a binary in BUNDLE/bin finds its libraries in BUNDLE/lib):
#
#   bench/host_path.sh --rankd BIN/rankd --rankload BIN/rankload \
#       --serve_bench BIN/serve_bench --backend cpu --out DIR
#
# Compare builds on the same machine with the same options: only (a) is immune
# to client noise; (b) and (c) share the cores with the client. `--help` lists
# every option.
set -euo pipefail
bench_name=host_path.sh
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  bench_print_header 23
  cat <<'EOF'
Options (defaults in brackets):
  --rankd PATH          rankd binary (required)
  --rankload PATH       rankload binary (required)
  --serve_bench PATH    serve_bench binary (closed loop; without it rankload
                        --mode closed is used)
  --out DIR             reports go here (required; created)
  --backend B           rankd serve --backend: cpu | cuda | auto [cpu]
  --preset P            rankd gen-model --preset [mini]
  --num_tables N        gen-model --num_tables (mini: 3..16; 0 = preset's) [16]
  --scale F             gen-model --scale [1]
  --candidates N        candidates per request of every run [1]
  --work DIR            model and request files [a temporary directory]
  --rates R[,R...]      open-loop rates of the CPU-per-request runs [2000,6000]
  --cpu_s S             measured seconds per CPU run [8]
  --repeat N            CPU runs per rate (the summary gives each and the median) [3]
  --low_rps R           low-load rate [200]
  --low_s S             low-load seconds [5]
  --concurrency C[,C]   closed-loop concurrencies [16,64]
  --closed_s S          closed-loop seconds per concurrency [4]
  --connections N       gRPC connections of the clients [4]
  --threads N           rankload sender threads (0 = cores / 4) [1]
  --workers N           rankd serve --workers (0 = automatic) [0]
  --gpu_workers N       rankd serve --gpu_workers (0 = default) [0]
  --serve_flags "F..."  more rankd serve flags, word-split [""]
  --server_cpus LIST    taskset -c LIST for rankd (e.g. 1), "" = no pinning [""]
  --client_cpus LIST    taskset -c LIST for the clients (e.g. 0) [""]
  --label L             label of the summary [""]
  --parts P             which measurements: any of a,b,c [a,b,c] (a alone is
                        quick: interleave builds' runs to cancel machine drift)
EOF
}

rankd="" rankload="" serve_bench="" out="" backend=cpu preset=mini num_tables=16 scale=1
work="" rates="2000,6000" cpu_s=8 repeat=3 low_rps=200 low_s=5 concurrency="16,64"
closed_s=4 connections=4 threads=1 workers=0 gpu_workers=0 serve_extra="" label=""
server_cpus="" client_cpus="" parts="a,b,c" candidates=1
# --option VALUE sets the variable of the same name ("option:variable" otherwise).
options="rankd rankload serve_bench out backend preset num_tables scale candidates work rates cpu_s
  repeat low_rps low_s concurrency closed_s connections threads workers gpu_workers
  serve_flags:serve_extra label server_cpus client_cpus parts"
bench_parse_options "$options" "$@"
bench_require_binaries "$rankd" "$rankload" "$out"
if [ -n "$serve_bench" ] && [ ! -x "$serve_bench" ]; then
  bench_usage_error "--serve_bench: $serve_bench is not an executable"
fi
bench_positive_int --candidates "$candidates"
bench_check_backend "$backend"

bench_binaries rankd rankload serve_bench

bench_dirs "$out" "$work"

# --- the model, the requests and the server -------------------------------------
model_dir="$work/models/$preset/1"
if [ ! -f "$model_dir/model.pbtxt" ]; then
  gen=(--preset "$preset" --scale "$scale" --out "$model_dir")
  [ "$num_tables" != 0 ] && gen+=(--num_tables "$num_tables")
  say "gen-model ${gen[*]}"
  "$rankd" gen-model "${gen[@]}" >&2
fi
reqs="$work/requests_$candidates.jsonl"
if [ ! -s "$reqs" ]; then
  "$rankd" gen-requests --model "$model_dir" --count 1000 --candidates "$candidates" --seed 12 \
    --output "$reqs" >/dev/null
fi
ports="$work/ports"
serve_flags=(--model_root "$work/models" --backend "$backend" --host 127.0.0.1 --grpc_port 0
  --metrics_port 0 --admin_port -1 --http_port -1 --port_file "$ports" --log_level warn)
[ "$workers" != 0 ] && serve_flags+=(--workers "$workers")
[ "$gpu_workers" != 0 ] && serve_flags+=(--gpu_workers "$gpu_workers")
# shellcheck disable=SC2206
[ -n "$serve_extra" ] && serve_flags+=($serve_extra)
say "starting rankd serve ${serve_flags[*]}"
# Pinning (optional) keeps the client off the server's cores, which makes runs
# on a small shared machine comparable.
bench_pin server_pin --server_cpus "$server_cpus"
bench_pin client_pin --client_cpus "$client_cpus"
bench_start_rankd "$out/rankd.log" "$ports" "${server_pin[@]}" "$rankd" serve "${serve_flags[@]}"
murl="http://127.0.0.1:$metrics/metrics"

# snapshot FILE: the server's CPU ticks (process, and per thread name), its
# context switches (voluntary + involuntary, all threads) and its
# answered-request count, as JSON.
snapshot() {
  python3 - "$pid" "$murl" >"$1" <<'PY'
import json, os, sys, urllib.request
pid, url = sys.argv[1], sys.argv[2]
def ticks(path):
    s = open(path).read()
    comm = s[s.index("(") + 1:s.rindex(")")]
    f = s[s.rindex(")") + 2:].split()
    return comm, int(f[11]) + int(f[12])  # utime, stime (fields 14, 15)
_, total = ticks(f"/proc/{pid}/stat")
threads = {}
switches = 0
for t in os.listdir(f"/proc/{pid}/task"):
    try:
        comm, t_ticks = ticks(f"/proc/{pid}/task/{t}/stat")
        for line in open(f"/proc/{pid}/task/{t}/status"):
            if "ctxt_switches:" in line:
                switches += int(line.split()[1])
    except OSError:
        continue
    threads[comm] = threads.get(comm, 0) + t_ticks
requests = 0.0
for line in urllib.request.urlopen(url, timeout=10).read().decode().splitlines():
    if line.startswith("rankd_requests_total{"):
        requests += float(line.rsplit(" ", 1)[1])
json.dump({"ticks": total, "threads": threads, "requests": requests, "switches": switches,
           "hz": os.sysconf("SC_CLK_TCK")}, sys.stdout)
PY
}

rl() {  # rankload with the common flags
  "${client_pin[@]}" "$rankload" --target "127.0.0.1:$grpc" --requests "$reqs" --connections "$connections" \
    --threads "$threads" --deadline_ms 1000 --quiet "$@"
}

# --- warm-up (connections, allocator, caches) -------------------------------------
rl --mode open --rate "${rates%%,*}" --duration_s 2 --warmup_s 0 >/dev/null 2>&1 || true

want() { case ",$parts," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

# --- (a) server CPU per request at fixed open-loop rates -----------------------------
IFS=, read -r -a rate_list <<<"$rates"
want a || rate_list=()
for r in "${rate_list[@]}"; do
  for i in $(seq "$repeat"); do
    name="cpu_${r}_$i"
    snapshot "$out/$name.before.json"
    rl --mode open --rate "$r" --duration_s "$cpu_s" --warmup_s 0 --json "$out/$name.json" \
      >"$out/$name.txt" 2>&1 || { echo "host_path.sh: rankload $name failed" >&2; tail -5 "$out/$name.txt" >&2; exit 1; }
    snapshot "$out/$name.after.json"
    say "$name: $(grep -E '^  (requests|latency)' "$out/$name.txt" | tr -s ' ' | tr '\n' ' ')"
  done
done

# --- (c) low load ---------------------------------------------------------------------
if want c; then
  rl --mode open --rate "$low_rps" --duration_s "$low_s" --warmup_s 1 --metrics_url "$murl" \
    --json "$out/low_load.json" >"$out/low_load.txt" 2>&1 ||
    { echo "host_path.sh: rankload low_load failed" >&2; tail -5 "$out/low_load.txt" >&2; exit 1; }
  say "low load: $(grep -E '^  latency' "$out/low_load.txt" | tr -s ' ')"
fi

# --- (b) closed loop --------------------------------------------------------------------
IFS=, read -r -a conc_list <<<"$concurrency"
want b || conc_list=()
for c in "${conc_list[@]}"; do
  if [ -n "$serve_bench" ]; then
    "${client_pin[@]}" "$serve_bench" --target "127.0.0.1:$grpc" --requests "$reqs" --concurrency "$c" \
      --connections "$connections" --duration_s "$closed_s" --warmup_s 1 --label "closed" \
      >"$out/closed_$c.txt" 2>&1
  else
    rl --mode closed --concurrency "$c" --duration_s "$closed_s" --warmup_s 1 \
      --json "$out/closed_$c.json" >"$out/closed_$c.txt" 2>&1
  fi
  say "closed $c: $(tail -1 "$out/closed_$c.txt" | tr -s ' ')"
done

say "done in $((SECONDS - bench_t0)) s; stopping rankd"
kill -TERM "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
pid=""

# --- the summary ----------------------------------------------------------------------
want a || rates=""
python3 - "$out" "$rates" "$repeat" "$concurrency" "$backend $preset tables=$num_tables scale=$scale $label" \
  >"$out/summary.txt" <<'PY'
import json, os, re, statistics, sys
out, rates, repeat, conc, what = sys.argv[1:6]
def load(name):
    p = os.path.join(out, name)
    return json.load(open(p)) if os.path.exists(p) else None
print(f"rankd host path: {what.strip()}")
for r in filter(None, rates.split(",")):
    per, sw, lines = [], [], []
    for i in range(1, int(repeat) + 1):
        a, b = load(f"cpu_{r}_{i}.before.json"), load(f"cpu_{r}_{i}.after.json")
        run = load(f"cpu_{r}_{i}.json")
        n = b["requests"] - a["requests"]
        us = (b["ticks"] - a["ticks"]) * 1e6 / a["hz"] / max(n, 1)
        per.append(us)
        sw.append((b["switches"] - a["switches"]) / max(n, 1))
        st = run["steps"][0]
        top = sorted(((v - a["threads"].get(k, 0), k) for k, v in b["threads"].items()), reverse=True)
        split = ", ".join(f"{k} {d * 1e6 / a['hz'] / max(n, 1):.1f}" for d, k in top[:5] if d > 0)
        lines.append(f"    run {i}: {us:6.1f} us/request, {sw[-1]:.2f} context switches/request, "
                     f"over {n:.0f} requests "
                     f"(achieved {st['achieved_rps']:.0f} req/s, errors {st['errors']}, "
                     f"p50 {st['latency_us']['p50']:.0f} us, p99 {st['latency_us']['p99']:.0f} us); "
                     f"by thread: {split}")
    print(f"  (a) server CPU at {r} req/s open loop: median {statistics.median(per):.1f} us/request "
          f"(min {min(per):.1f}), {statistics.median(sw):.2f} context switches/request")
    for l in lines:
        print(l)
for c in conc.split(","):
    p = os.path.join(out, f"closed_{c}.txt")
    if not os.path.exists(p):
        continue
    last = open(p).read().strip().splitlines()[-1] if open(p).read().strip() else ""
    m = re.search(r"([0-9.]+) req/s.*p50 +([0-9.]+) us.*p99 +([0-9.]+) us", last)
    if m:
        cpu = re.search(r"client_cpu ([0-9.]+) cores", last)
        print(f"  (b) closed loop, {c} in flight: {float(m.group(1)):.0f} req/s, "
              f"p50 {float(m.group(2)):.0f} us, p99 {float(m.group(3)):.0f} us"
              + (f", client {float(cpu.group(1)):.2f} cores" if cpu else ""))
    else:
        j = load(f"closed_{c}.json")
        if j:
            st = j["steps"][0]
            print(f"  (b) closed loop, {c} in flight: {st['achieved_rps']:.0f} req/s, "
                  f"p50 {st['latency_us']['p50']:.0f} us, p99 {st['latency_us']['p99']:.0f} us")
low = load("low_load.json")
if low:
    st = low["steps"][0]
    sw = st.get("server_window") or {}
    print(f"  (c) low load {st['target_rps']:.0f} req/s: p50 {st['latency_us']['p50']:.0f} us, "
          f"p99 {st['latency_us']['p99']:.0f} us (service p50 {st['service_us']['p50']:.0f} us); "
          f"server request {sw.get('mean_request_us', 0):.0f} us mean, queue "
          f"{sw.get('mean_queue_us', 0):.0f} us, compute {sw.get('mean_compute_us', 0):.0f} us/batch")
print(f"  reports: {out}")
PY
cat "$out/summary.txt"
