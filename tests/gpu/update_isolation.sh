#!/bin/bash
# Where an update stream's cost to serving comes from (issue 16; docs/benchmarks.md,
# "Serving p99 under an update stream"). Runs on the GPU machine from the
# repository root with the bundle unpacked in .gpu/bundle (BUNDLE=DIR for
# another): one rankd on cores 0-7 serves two mlperf x0.05 models (init random,
# dim 128 fp32 tables), `m` (scored) and `u` (never scored); rankload on cores
# 8-15 runs an open loop on `m` at half its closed-loop capacity (64-candidate
# requests, 32 connections, 8 threads, 20 s windows after 2 s of warm-up):
#   base<k>   alone;
#   other<k>  with a 1 M rows/s `rankctl update` stream into `u`: the same gRPC
#             intake, parse and apply on the host, none of `m`'s batches
#             ordered behind the writes;
#   same<k>   with the same stream into `m`.
# ROUNDS (2) rounds of base / other / same, then base once more; SKIP_OTHER=1
# leaves the `other` runs out; SERVE_FLAGS adds rankd serve flags. Prints one
# line per run (client p50 / p99, server p99 from its histogram, in us) and the
# medians; JSON and logs go under OUT.
# Usage: bash tests/gpu/update_isolation.sh OUT
set -u
[ $# -eq 1 ] || { echo "usage: $0 OUT (see the top of the file)" >&2; exit 2; }
B=$(cd "${BUNDLE:-.gpu/bundle}" && pwd) || exit 2
O=$1; W=$(mktemp -d); mkdir -p "$O"
trap 'rm -rf "$W"' EXIT
util=tests/e2e/live_embeddings_util.py
for name in m u; do
  seed=()
  [ $name = u ] && seed=(--seed 5)  # m: gen-model's default seed
  "$B/run" rankd gen-model --preset mlperf --scale 0.05 --init random --name $name "${seed[@]}" \
    --out "$W/root/$name/1" > /dev/null 2>&1 || { echo "gen-model $name failed" >&2; exit 1; }
  python3 $util make-delta-static "$W/root/$name/1" "$W/d$name.safetensors" "$W/s$name.json" 9 262144 1
done
"$B/run" rankd gen-requests --model "$W/root/m/1" --count 200 --candidates 64 --zipf 1.05 --seed 21 \
  --output "$W/req.jsonl" > /dev/null 2>&1
# shellcheck disable=SC2086  # SERVE_FLAGS: several flags, word-split on purpose
taskset -c 0-7 "$B/run" rankd serve --model_root "$W/root" --backend cuda --host 127.0.0.1 \
  --grpc_port 0 --metrics_port 0 --admin_port 0 --http_port 0 --port_file "$W/ports" \
  --log_level warn ${SERVE_FLAGS:-} > "$O/serve.log" 2>&1 &
sp=$!
for _ in $(seq 900); do [ -s "$W/ports" ] && break; kill -0 $sp 2>/dev/null || break; sleep 0.2; done
port() { sed -n "s/^$1=//p" "$W/ports"; }
P=$(port grpc_port); M=$(port metrics_port); A=$(port admin_port)
[ -n "$P" ] || { echo "rankd did not start: $(tail -3 "$O/serve.log")" >&2; exit 1; }
rl() {  # tag [rankload flags]
  local tag=$1; shift
  taskset -c 8-15 "$B/run" rankload --target "127.0.0.1:$P" --requests "$W/req.jsonl" \
    --connections 32 --threads 8 --quiet --metrics_url "http://127.0.0.1:$M/metrics" \
    --json "$O/$tag.json" "$@" > "$O/$tag.txt" 2>&1
}
line() {  # tag: "tag p50 p99 server_p99 behind"
  python3 - "$O/$1.json" "$1" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))["steps"][-1]
l, sw = st["latency_us"], st.get("server_window") or {}
print(sys.argv[2], "%.0f %.0f %.0f" % (l["p50"], l["p99"], sw.get("p99_request_us") or 0),
      "behind" if st["client_behind"] else "on-time")
PY
}
rl capacity --mode closed --concurrency 64,256 --duration_s 5 --warmup_s 1
cap=$(python3 -c 'import json,sys; print("%.0f" % max(s["achieved_rps"] for s in json.load(open(sys.argv[1]))["steps"]))' "$O/capacity.json")
open=(--mode open --rate $((cap / 2)) --duration_s 20 --warmup_s 2)
echo "capacity $cap req/s; open loop at $((cap / 2)) req/s ${SERVE_FLAGS:-}"
with_stream() {  # tag model
  local tag=$1 model=$2 up
  taskset -c 8-15 "$B/run" rankctl update --admin_target "127.0.0.1:$A" --model "$model" \
    --input "$W/d$model.safetensors" --producer_id isolation --max_rows_per_second 1000000 \
    --repeat 0 --repeat_for_s 24 > "$O/${tag}_stream.txt" 2>&1 &
  up=$!
  sleep 0.5
  rl "$tag" "${open[@]}"
  wait $up || echo "$tag: the update stream failed: $(tail -1 "$O/${tag}_stream.txt")" >&2
}
echo "run p50_us p99_us server_p99_us" > "$O/runs.txt"
rounds=${ROUNDS:-2}
for ((k = 1; k <= rounds; k++)); do
  rl base$k "${open[@]}"; line base$k >> "$O/runs.txt"
  if [ -z "${SKIP_OTHER:-}" ]; then with_stream other$k u; line other$k >> "$O/runs.txt"; fi
  with_stream same$k m; line same$k >> "$O/runs.txt"
done
rl base$k "${open[@]}"; line base$k >> "$O/runs.txt"
kill -TERM $sp; wait $sp
cat "$O/runs.txt"
python3 - "$O/runs.txt" <<'PY'
import re, statistics, sys
runs = [l.split() for l in open(sys.argv[1]).readlines()[1:] if l.strip()]
med = {}
for kind in ("base", "other", "same"):
    rows = [r for r in runs if re.fullmatch(kind + r"\d+", r[0])]
    if rows:
        med[kind] = (statistics.median(float(r[2]) for r in rows),
                     statistics.median(float(r[3]) for r in rows))
for kind, (c, s) in med.items():
    rel = "" if kind == "base" else " (%+.1f%% / %+.1f%%)" % (
        100 * (c / med["base"][0] - 1), 100 * (s / med["base"][1] - 1))
    print("median %s: client p99 %.0f us, server p99 %.0f us%s" % (kind, c, s, rel))
PY
