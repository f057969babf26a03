#!/usr/bin/env bash
# Serving benchmark on this machine (CPU backend unless a GPU build is used):
# single-request latency (concurrency 1) and throughput at rising concurrency
# for the mini preset (1-candidate and 64-candidate requests), then kaggle at
# scale 0.01 with 256 candidates. Prints one line per run; the numbers go in
# docs/benchmarks.md ("Serving latency, CPU backend"). Usage: bench/serve_latency.sh [duration_s]
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-5}
bazel build //server:rankd //bench:serve_bench >/dev/null 2>&1
bin=$(bazel info bazel-bin 2>/dev/null)
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
"$bin/server/rankd" gen-model --preset mini --out "$work/models/mini/1" 2>/dev/null
"$bin/server/rankd" gen-model --preset kaggle --scale 0.01 --out "$work/models/kaggle/1" 2>/dev/null
"$bin/server/rankd" gen-requests --model "$work/models/mini/1" --count 200 --candidates 1 --output "$work/mini1.jsonl"
"$bin/server/rankd" gen-requests --model "$work/models/mini/1" --count 200 --candidates 64 --output "$work/mini64.jsonl"
"$bin/server/rankd" gen-requests --model "$work/models/kaggle/1" --count 200 --candidates 256 --output "$work/kaggle256.jsonl"
"$bin/server/rankd" serve --model_root "$work/models" --grpc_port 0 --metrics_port -1 --admin_port -1 --http_port -1 \
  --port_file "$work/ports" --log_level warn &
pid=$!
for _ in $(seq 100); do [ -f "$work/ports" ] && break; sleep 0.1; done
port=$(sed -n 's/grpc_port=//p' "$work/ports")
echo "rankd on 127.0.0.1:$port ($(nproc) cores), ${dur} s per run"
run() { "$bin/bench/serve_bench" --target "127.0.0.1:$port" --duration_s "$dur" "$@"; }
for c in 1 4 16 64; do run --requests "$work/mini1.jsonl" --concurrency $c --connections 2 --label "mini B=1"; done
for c in 1 16; do run --requests "$work/mini64.jsonl" --concurrency $c --connections 2 --label "mini B=64"; done
for c in 1 8; do run --requests "$work/kaggle256.jsonl" --concurrency $c --connections 2 --label "kaggle(0.01) B=256"; done
