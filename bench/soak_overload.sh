#!/usr/bin/env bash
# Soak and overload (issue 17): does rankd stay correct and bounded for a long
# run at a steady load, and does it keep serving at its capacity, refusing the
# rest quickly, when offered three times more than it can do?
#
#   capacity  the highest closed-loop rate (rankload --mode closed) over a few
#             concurrencies: the server's measured capacity C, in requests/s
#   soak      open loop at --soak_load x C (0.7) for --soak_min minutes (30):
#             passes with zero failed calls and the server's RSS (VmRSS, sampled
#             every --rss_every_s) growing less than --max_rss_growth (1%) from
#             the sample at --warm_min minutes (5) to the end
#   overload  open loop at --overload x C (3) for --overload_s seconds (60):
#             passes when the OK answers per second (goodput) are at least
#             --min_goodput x C (0.8) and the p99 round trip (answer time -
#             send time, as the client sees it) of the RESOURCE_EXHAUSTED
#             answers is at most --max_reject_p99_ms (1)
# Writes everything under OUT and prints a summary last (also OUT/summary.txt);
# exits 0 when every part run passed, 1 otherwise.
#
# Needs no Bazel: the binaries are arguments, so it runs from a bundle on a GPU
# machine (a binary in BUNDLE/bin finds its libraries in BUNDLE/lib):
#
#   bench/soak_overload.sh --rankd BIN/rankd --rankload BIN/rankload --out DIR
#   bench/soak_overload.sh ... --backend cuda --soak_min 10
#
# The client shares the machine with the server; capacity is measured the same
# way, so the ratios hold. `--help` lists every option.
set -euo pipefail
bench_name=soak_overload.sh
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  bench_print_header 27
  cat <<'EOF'
Options (defaults in brackets):
  --rankd PATH            rankd binary (required)
  --rankload PATH         rankload binary (required)
  --out DIR               reports go here (required; created)
  --backend B             rankd serve --backend: cpu | cuda | auto [cpu]
  --preset P              rankd gen-model --preset [kaggle]
  --scale F               gen-model --scale [0.01]
  --gen_flags "F..."      more gen-model flags, word-split, e.g. "--top_mlp 4096,4096,1"
                          for a model whose GPU work outweighs its host work [""]
  --candidates N          candidates per request [256]
  --work DIR              model and request files [a temporary directory]
  --parts P               any of soak,overload [soak,overload]
  --capacity_conc C[,C]   closed-loop concurrencies of the capacity runs [8,32]
  --capacity_s S          seconds per capacity run [15]
  --soak_min M            soak minutes [30]
  --warm_min M            minute of the soak's RSS baseline [5]
  --soak_load F           soak rate as a fraction of capacity [0.7]
  --max_rss_growth F      largest RSS growth after the baseline [0.01]
  --overload X            overload rate as a multiple of capacity [3]
  --overload_s S          overload seconds [60]
  --min_goodput F         least goodput as a fraction of capacity [0.8]
  --max_reject_p99_ms MS  largest p99 round trip of RESOURCE_EXHAUSTED [1]
  --rss_every_s S         RSS sampling period [10]
  --connections N         gRPC connections of the client [4]
  --threads N             rankload sender threads (0 = cores / 4) [0]
  --deadline_ms MS        deadline of every call [1000]
  --serve_flags "F..."    more rankd serve flags, word-split [""]
  --server_cpus LIST      taskset -c LIST for rankd [""]
  --client_cpus LIST      taskset -c LIST for rankload [""]
  --label L               label of the summary [""]
EOF
}

rankd="" rankload="" out="" backend=cpu preset=kaggle scale=0.01 candidates=256 work=""
parts="soak,overload" capacity_conc="8,32" capacity_s=15 soak_min=30 warm_min=5 soak_load=0.7
max_rss_growth=0.01 overload=3 overload_s=60 min_goodput=0.8 max_reject_p99_ms=1 rss_every_s=10
connections=4 threads=0 deadline_ms=1000 serve_extra="" server_cpus="" client_cpus="" label=""
gen_extra=""
# --option VALUE sets the variable of the same name ("option:variable" otherwise).
options="rankd rankload out backend preset scale candidates work parts capacity_conc capacity_s
  soak_min warm_min soak_load max_rss_growth overload overload_s min_goodput max_reject_p99_ms
  rss_every_s connections threads deadline_ms serve_flags:serve_extra server_cpus client_cpus
  label gen_flags:gen_extra"
bench_parse_options "$options" "$@"
bench_require_binaries "$rankd" "$rankload" "$out"
bench_check_backend "$backend"
positive_num() {
  [[ "$2" =~ ^[0-9]*\.?[0-9]+$ ]] && awk -v v="$2" 'BEGIN { exit !(v > 0) }' ||
    { echo "$bench_name: $1: a positive number, got \"$2\"" >&2; exit 2; }
}
for pair in "--candidates:$candidates" "--capacity_s:$capacity_s" "--soak_min:$soak_min" \
  "--overload_s:$overload_s" "--rss_every_s:$rss_every_s" "--connections:$connections" \
  "--deadline_ms:$deadline_ms"; do
  bench_positive_int "${pair%%:*}" "${pair#*:}"
done
for pair in "--soak_load:$soak_load" "--max_rss_growth:$max_rss_growth" "--overload:$overload" \
  "--min_goodput:$min_goodput" "--max_reject_p99_ms:$max_reject_p99_ms" "--scale:$scale"; do
  positive_num "${pair%%:*}" "${pair#*:}"
done
[[ "$warm_min" =~ ^[0-9]+$ && "$warm_min" -lt "$soak_min" ]] ||
  { echo "$bench_name: --warm_min: an integer below --soak_min ($soak_min), got \"$warm_min\"" >&2; exit 2; }
[[ "$threads" =~ ^[0-9]+$ ]] || { echo "$bench_name: --threads: an integer >= 0, got \"$threads\"" >&2; exit 2; }
[[ "$capacity_conc" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
  { echo "$bench_name: --capacity_conc: positive integers separated by commas, got \"$capacity_conc\"" >&2; exit 2; }
for p in ${parts//,/ }; do
  case $p in soak|overload) ;; *) echo "$bench_name: --parts: soak and/or overload, got \"$p\"" >&2; exit 2 ;; esac
done
want() { case ",$parts," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

bench_binaries rankd rankload
bench_dirs "$out" "$work"

# --- the model, the requests and the server -------------------------------------------
model_dir="$work/models/$preset/1"
if [ ! -f "$model_dir/model.pbtxt" ]; then
  say "gen-model --preset $preset --scale $scale $gen_extra"
  # shellcheck disable=SC2086  # word-split on purpose: several flags
  "$rankd" gen-model --preset "$preset" --scale "$scale" $gen_extra --out "$model_dir" >&2
fi
reqs="$work/requests_$candidates.jsonl"
if [ ! -s "$reqs" ]; then
  "$rankd" gen-requests --model "$model_dir" --count 200 --candidates "$candidates" --seed 17 \
    --output "$reqs" >/dev/null
fi
ports="$work/ports"
serve_flags=(--model_root "$work/models" --backend "$backend" --host 127.0.0.1 --grpc_port 0
  --metrics_port 0 --admin_port -1 --http_port -1 --port_file "$ports" --log_level warn)
# shellcheck disable=SC2206
[ -n "$serve_extra" ] && serve_flags+=($serve_extra)
bench_pin server_pin --server_cpus "$server_cpus"
bench_pin client_pin --client_cpus "$client_cpus"
say "starting rankd serve ${serve_flags[*]}"
bench_start_rankd "$out/rankd.log" "$ports" "${server_pin[@]}" "$rankd" serve "${serve_flags[@]}"

rl() {  # rankload with the common flags
  "${client_pin[@]}" "$rankload" --target "127.0.0.1:$grpc" --requests "$reqs" \
    --connections "$connections" --threads "$threads" --deadline_ms "$deadline_ms" --quiet "$@"
}
json_field() {  # json_field FILE EXPR: a value of a rankload JSON report's first step
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["steps"][0]; print(eval(sys.argv[2]))' "$1" "$2"
}
# rss_kib: the server's resident set (VmRSS) in KiB.
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status"; }

# --- capacity -----------------------------------------------------------------------------
rl --mode closed --concurrency "${capacity_conc%%,*}" --duration_s 3 --warmup_s 0 >/dev/null 2>&1 || true
capacity=0
for c in ${capacity_conc//,/ }; do
  rl --mode closed --concurrency "$c" --duration_s "$capacity_s" --warmup_s 2 \
    --json "$out/capacity_$c.json" >"$out/capacity_$c.txt" 2>&1 ||
    { echo "$bench_name: capacity run at concurrency $c failed" >&2; tail -5 "$out/capacity_$c.txt" >&2; exit 1; }
  rps=$(json_field "$out/capacity_$c.json" 's["ok_rps"]')
  errs=$(json_field "$out/capacity_$c.json" 's["errors"]')
  say "capacity run, $c in flight: $rps OK/s, $errs errors"
  capacity=$(awk -v a="$capacity" -v b="$rps" 'BEGIN { print (b > a ? b : a) }')
done
awk -v c="$capacity" 'BEGIN { exit !(c > 0) }' || { echo "$bench_name: capacity is 0" >&2; exit 1; }
echo "$capacity" >"$out/capacity.txt"
say "capacity C = $capacity requests/s"

# --- soak -----------------------------------------------------------------------------------
if want soak; then
  soak_rps=$(awk -v c="$capacity" -v f="$soak_load" 'BEGIN { printf "%.1f", c * f }')
  say "soak: $soak_rps requests/s for $soak_min min; RSS every $rss_every_s s"
  echo "seconds,rss_kib" >"$out/soak_rss.csv"
  rl --mode open --rate "$soak_rps" --duration_s $((soak_min * 60)) --warmup_s 0 \
    --interval_s 60 --json "$out/soak.json" >"$out/soak.txt" 2>&1 &
  load_pid=$!
  t0=$SECONDS
  while kill -0 "$load_pid" 2>/dev/null; do
    echo "$((SECONDS - t0)),$(rss_kib)" >>"$out/soak_rss.csv"
    for _ in $(seq $((rss_every_s * 10))); do kill -0 "$load_pid" 2>/dev/null || break; sleep 0.1; done
  done
  wait "$load_pid" || { echo "$bench_name: soak rankload failed" >&2; tail -5 "$out/soak.txt" >&2; exit 1; }
  echo "$((SECONDS - t0)),$(rss_kib)" >>"$out/soak_rss.csv"
  kill -0 "$pid" 2>/dev/null || { echo "$bench_name: rankd died during the soak" >&2; tail -20 "$out/rankd.log" >&2; exit 1; }
fi

# --- overload --------------------------------------------------------------------------------
if want overload; then
  over_rps=$(awk -v c="$capacity" -v x="$overload" 'BEGIN { printf "%.1f", c * x }')
  say "overload: $over_rps requests/s for $overload_s s"
  # No client-side cap on calls in flight: the server, not the client, must
  # refuse what it cannot do.
  rl --mode open --rate "$over_rps" --duration_s "$overload_s" --warmup_s 5 \
    --max_in_flight 1000000 --response_log "$out/overload_calls.csv" \
    --json "$out/overload.json" >"$out/overload.txt" 2>&1 ||
    { echo "$bench_name: overload rankload failed" >&2; tail -5 "$out/overload.txt" >&2; exit 1; }
  kill -0 "$pid" 2>/dev/null || { echo "$bench_name: rankd died during the overload" >&2; tail -20 "$out/rankd.log" >&2; exit 1; }
fi

say "done in $((SECONDS - bench_t0)) s; stopping rankd"
kill -TERM "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
pid=""

# --- the summary ------------------------------------------------------------------------------
set +e
python3 - "$out" "$capacity" "$parts" "$warm_min" "$max_rss_growth" "$min_goodput" \
  "$max_reject_p99_ms" "$backend $preset scale=$scale $gen_extra candidates=$candidates $label" \
  >"$out/summary.txt" <<'PY'
import csv, json, os, sys
out, cap, parts, warm_min, max_growth, min_goodput, max_rej_ms, what = sys.argv[1:9]
cap, warm_s = float(cap), 60 * int(warm_min)
max_growth, min_goodput, max_rej_ms = float(max_growth), float(min_goodput), float(max_rej_ms)
ok_all = True
print(f"rankd soak and overload: {what.strip()}")
print(f"  capacity C (closed loop, best of the runs): {cap:.1f} requests/s")
def step(name):
    return json.load(open(os.path.join(out, name)))["steps"][0]
if "soak" in parts.split(","):
    s = step("soak.json")
    rows = [(int(r["seconds"]), int(r["rss_kib"])) for r in csv.DictReader(open(os.path.join(out, "soak_rss.csv"))) if r["rss_kib"]]
    base = next((kib for sec, kib in rows if sec >= warm_s), rows[-1][1])
    end, peak = rows[-1][1], max(kib for sec, kib in rows if sec >= warm_s) if rows[-1][0] >= warm_s else rows[-1][1]
    growth = (end - base) / base
    passed = s["errors"] == 0 and growth < max_growth
    ok_all &= passed
    print(f"  soak: {s['target_rps']:.1f} requests/s offered ({s['target_rps'] / cap:.2f} C) for "
          f"{s['duration_s'] / 60:.0f} min: {s['ok']} OK, {s['errors']} failed "
          f"{dict(s['errors_by_code']) or ''}; p50 {s['latency_us']['p50'] / 1000:.2f} ms, "
          f"p99 {s['latency_us']['p99'] / 1000:.2f} ms")
    print(f"        RSS {rows[0][1] / 1024:.1f} MiB at start, {base / 1024:.1f} MiB at {warm_min} min, "
          f"{end / 1024:.1f} MiB at the end (peak after {warm_min} min {peak / 1024:.1f} MiB): "
          f"growth {100 * growth:+.2f}% -> {'PASS' if passed else 'FAIL'} "
          f"(zero errors, growth < {100 * max_growth:g}%)")
if "overload" in parts.split(","):
    s = step("overload.json")
    rej = []
    with open(os.path.join(out, "overload_calls.csv")) as f:
        for r in csv.DictReader(f):
            if r["code"] == "RESOURCE_EXHAUSTED":
                rej.append((int(r["done_unix_us"]) - int(r["sent_unix_us"])) / 1000)
    rej.sort()
    p = lambda q: rej[min(len(rej) - 1, int(q * len(rej)))] if rej else float("nan")
    goodput = s["ok_rps"]
    passed = goodput >= min_goodput * cap and (not rej or p(0.99) <= max_rej_ms)
    ok_all &= passed
    print(f"  overload: {s['target_rps']:.1f} requests/s offered ({s['target_rps'] / cap:.2f} C), "
          f"sent {s['sent_rps']:.1f}/s for {s['duration_s']:.0f} s: goodput {goodput:.1f} OK/s "
          f"({goodput / cap:.2f} C); answers by code {dict(s['total_by_code'])}")
    print(f"        RESOURCE_EXHAUSTED round trip (all calls, warm-up included): {len(rej)} answers, "
          f"p50 {p(0.5):.3f} ms, p99 {p(0.99):.3f} ms, max {rej[-1] if rej else float('nan'):.3f} ms; "
          f"latency from schedule p50 {s['latency_us']['p50'] / 1000:.1f} ms, p99 {s['latency_us']['p99'] / 1000:.1f} ms "
          f"-> {'PASS' if passed else 'FAIL'} "
          f"(goodput >= {min_goodput:g} C, rejection p99 <= {max_rej_ms:g} ms)")
print(f"  verdict: {'PASS' if ok_all else 'FAIL'}; reports: {out}")
sys.exit(0 if ok_all else 1)
PY
rc=$?
cat "$out/summary.txt"
exit "$rc"
