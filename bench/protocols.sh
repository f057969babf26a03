#!/usr/bin/env bash
# rankd's three scoring front ends on the same requests (issue 19): rankd's
# own gRPC Score, KServe v2 ModelInfer with raw tensor contents (same port),
# and HTTP/JSON POST /v1/models/{m}:score. For each case (model, candidates
# per request) and each protocol, one closed-loop rankload step at a fixed
# concurrency (HTTP: as many keep-alive connections, so no call waits in the
# client) reports
#   - throughput (OK requests/s, candidates/s) and client p50 / p99;
#   - server CPU per request and per candidate: the rankd process's utime +
#     stime (/proc/PID/stat) over the step, divided by the requests and
#     candidates rankd counted meanwhile (rankload's --metrics_url scrapes),
#     which the client's own cost does not touch.
# Throughput shares the machine's cores with rankload (pin them apart with
# --server_cpus / --client_cpus where there are enough); the server CPU
# figures are the clean comparison. With --repeat N the protocols take turns N
# times (rankd, kserve, http, rankd, ...) so drift on the machine hits each
# alike, and the table shows each figure's median. Writes OUT/runs.tsv (every
# run), OUT/summary.tsv (the medians), OUT/*.json, and prints the table last.
#
#   bench/protocols.sh --rankd BIN/rankd --rankload BIN/rankload --out DIR \
#       [--backend cpu|cuda] [--cases "mini:1 mini:64 kaggle:256"] \
#       [--concurrency 32] [--duration_s 5] [--repeat 3] [--kaggle_scale 0.01] \
#       [--serve_flags "--rpc_threads -1"]   (more rankd serve flags, split on spaces)
set -euo pipefail
bench_name=protocols.sh
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
usage() { bench_print_header 23; }

rankd_bin= rankload_bin= out_dir= work_dir= backend=cpu cases="mini:1 mini:64 kaggle:256"
concurrency=32 duration=5 warmup=2 repeat=3 kaggle_scale=0.01 server_cpus= client_cpus= protocols="rankd kserve http"
serve_flags=
# --option VALUE sets the variable of the same name ("option:variable" otherwise).
options="rankd:rankd_bin rankload:rankload_bin out:out_dir work:work_dir backend cases protocols
  concurrency duration_s:duration repeat warmup_s:warmup kaggle_scale server_cpus client_cpus
  serve_flags"
bench_parse_options "$options" "$@"
bench_require_binaries "$rankd_bin" "$rankload_bin" "$out_dir"
bench_positive_int --concurrency "$concurrency"
bench_positive_int --repeat "$repeat"
bench_binaries rankd_bin rankload_bin
bench_pin server_pin --server_cpus "$server_cpus"
bench_pin client_pin --client_cpus "$client_cpus"
bench_dirs "$out_dir" "$work_dir"

# cpu_ticks PID: utime + stime of the process, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

printf "case\tprotocol\tok_rps\tcandidates_per_s\tp50_us\tp99_us\terrors\tserver_cpu_us_per_request\tserver_cpu_us_per_candidate\n" \
  >"$out/runs.tsv"
for case in $cases; do
  model=${case%%:*} candidates=${case##*:}
  case $model in
    mini) preset=mini scale=1 ;;
    kaggle) preset=kaggle scale=$kaggle_scale ;;
    *) echo "$bench_name: --cases: model $model is not mini or kaggle" >&2; exit 2 ;;
  esac
  [ -f "$work/models/$model/1/model.pbtxt" ] ||
    "$rankd_bin" gen-model --preset "$preset" --scale "$scale" --name "$model" \
      --out "$work/models/$model/1" >/dev/null 2>&1
  "$rankd_bin" gen-requests --model "$work/models/$model/1" --count 200 \
    --candidates "$candidates" --seed 11 --output "$work/req_${model}_$candidates.jsonl"
done
# shellcheck disable=SC2086  # --serve_flags: split into words on purpose
bench_start_rankd "$work/rankd.log" "$work/ports" "${server_pin[@]}" "$rankd_bin" serve \
  --model_root "$work/models" --backend "$backend" --grpc_port 0 --http_port 0 --metrics_port 0 \
  --admin_port -1 --port_file "$work/ports" --log_level warn $serve_flags
http=$(sed -n 's/^http_port=//p' "$work/ports")

for case in $cases; do
  model=${case%%:*} candidates=${case##*:}
  for round in $(seq "$repeat"); do for protocol in $protocols; do
    say "$model B=$candidates over $protocol, concurrency $concurrency (round $round of $repeat)"
    json="$out/${model}_${candidates}_${protocol}_$round.json"
    t0=$(cpu_ticks "$pid")
    "${client_pin[@]}" "$rankload_bin" --target "127.0.0.1:$grpc" --protocol "$protocol" \
      --http_target "127.0.0.1:$http" --http_connections "$concurrency" \
      --requests "$work/req_${model}_$candidates.jsonl" --mode closed --concurrency "$concurrency" \
      --connections 4 --warmup_s "$warmup" --duration_s "$duration" --quiet \
      --metrics_url "http://127.0.0.1:$metrics/metrics" --json "$json" >/dev/null 2>"$work/rankload.err" ||
      { echo "$bench_name: rankload failed:" >&2; tail -5 "$work/rankload.err" >&2; exit 1; }
    t1=$(cpu_ticks "$pid")
    python3 - "$json" "$case" "$protocol" "$((t1 - t0))" "$hz" >>"$out/runs.tsv" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
step = r["steps"][0]
server = step["server_total"] or {}
ticks, hz = int(sys.argv[4]), int(sys.argv[5])
cpu_us = ticks * 1e6 / hz
requests, candidates = server.get("requests", 0), server.get("candidates", 0)
print("\t".join([sys.argv[2], sys.argv[3], f"{step['ok_rps']:.0f}", f"{step['candidates_per_s']:.0f}",
                 f"{step['latency_us']['p50']:.0f}", f"{step['latency_us']['p99']:.0f}",
                 str(step["errors"]),
                 f"{cpu_us / requests:.1f}" if requests else "-",
                 f"{cpu_us / candidates:.3f}" if candidates else "-"]))
PY
  done; done
done
# The median of every figure by (case, protocol), in the order run.
python3 - "$out/runs.tsv" >"$out/summary.tsv" <<'PY'
import statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
head, runs = rows[0], rows[1:]
groups = {}
for r in runs:
    groups.setdefault((r[0], r[1]), []).append(r)
print("\t".join(head + ["runs"]))
for (case, protocol), rs in groups.items():
    cells = [case, protocol]
    for i in range(2, len(head)):
        vals = [float(r[i]) for r in rs if r[i] != "-"]
        med = statistics.median(vals) if vals else None
        cells.append("-" if med is None else f"{med:.3f}" if "per_candidate" in head[i]
                     else f"{med:.1f}" if "per_request" in head[i] else f"{med:.0f}")
    print("\t".join(cells + [str(len(rs))]))
PY
say "done; $(nproc) cores, backend $backend, concurrency $concurrency, ${duration} s steps"
if command -v column >/dev/null; then column -t -s $'\t' "$out/summary.tsv"; else cat "$out/summary.tsv"; fi
