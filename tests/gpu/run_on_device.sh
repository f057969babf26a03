#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with the bundle that
# scripts/gpu_suite.sh built carried in .gpu/bundle: the GPU test suite, the
# reference checks and the benchmarks. Logs go under $OUT (or /tmp/rankd_gpu);
# a short table is printed last. The device tool returns only a few files from
# $OUT: point OUT elsewhere and tar it into one file when running many sections.
#   SECTIONS="kernels sanitizer engine host serve servelat oversize cache bench lookup reference"
#   (default: all but reference, which re-checks the CPU engine against PyTorch;
#   more sections, run only when named: bigserve loadprobe workersweep hostpath slo floor sweep
#   cachesweep hostread lifecycle live liveload protocols)
# RANKD_BACKEND (default cuda) is the backend of the servers that serve_up starts:
# RANKD_BACKEND=cpu dry-runs such a section (e.g. liveload at a small scale) off the
# GPU machine, with a bundle whose run script starts bazel-bin's binaries.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/rankd_gpu}
mkdir -p "$out"
work=${WORK:-$(mktemp -d)}
bundle=.gpu/bundle
# scripts/gpu_suite.sh ships the bundle compressed (the carry limit is 64 MiB).
if [ ! -d "$bundle" ] && [ -f .gpu/bundle.tar.xz ]; then
  xz -dc .gpu/bundle.tar.xz | tar -C .gpu -xf -
fi
run() { "$bundle/run" "$@"; }
export PYTHONUNBUFFERED=1
sections=${SECTIONS:-"kernels sanitizer engine host serve servelat oversize cache bench lookup"}
want() { [[ " $sections " == *" $1 "* ]]; }
table="$out/table.txt"
: > "$table"
row() { printf "%-44s %s\n" "$1" "$2" | tee -a "$table"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"

# --- kernels: every CUDA kernel against its CPU twin --------------------------
if want kernels; then
  for t in "$bundle"/bin/*_gpu_test; do
    n=$(basename "$t")
    run "$n" > "$out/$n.log" 2>&1
    rc=$?
    row "test $n" "$([ $rc = 0 ] && echo PASS || echo "FAIL (rc $rc)") $(grep -oE '\[  PASSED  \] [0-9]+ tests?' "$out/$n.log")"
  done
fi

# --- sanitizer: compute-sanitizer memcheck on the kernel tests ----------------
if want sanitizer; then
  for n in embedding_lookup_gpu_test embedding_cache_gpu_test shared_cache_gpu_test hash_build_gpu_test interaction_gpu_test dense_layers_gpu_test small_rows_linear_gpu_test dynamic_table_gpu_test split_tf32_gpu_test split_bf16_gpu_test cuda_worker_gpu_test unit_bags_gpu_test; do
    [ -x "$bundle/bin/$n" ] || continue
    LD_LIBRARY_PATH="$bundle/lib" timeout 300 compute-sanitizer --tool memcheck --error-exitcode 7 \
      "$bundle/bin/$n" --gtest_brief=1 > "$out/memcheck_$n.log" 2>&1
    rc=$?
    row "memcheck $n" "$([ $rc = 0 ] && echo PASS || echo "FAIL (rc $rc)") $(grep -m1 -oE 'ERROR SUMMARY: [0-9]+ errors' "$out/memcheck_$n.log")"
  done
fi

# Models and requests shared by the engine and bench sections.
gen() {  # name preset scale [flags]
  local name=$1 preset=$2 scale=$3; shift 3
  [ -f "$work/models/$name/1/model.pbtxt" ] ||
    run rankd gen-model --preset "$preset" --scale "$scale" --name "$name" \
      --out "$work/models/$name/1" "$@" > /dev/null 2>&1
  [ -f "$work/$name.json" ] || run rankd inspect --model "$work/models/$name/1" --json > "$work/$name.json"
}
reqs() {  # name batch
  local f="$work/$1.b$2.jsonl"
  [ -f "$f" ] || run rankd gen-requests --model "$work/models/$1/1" --count 1 --candidates "$2" \
    --seed 7 --output "$f"
  echo "$f"
}

# --- engine: whole CUDA engine vs the CPU engine ------------------------------
if want engine; then
  gen mini mini 1
  gen mini8 mini 1 --num_tables 8
  gen mini16dyn mini 1 --num_tables 16 --dynamic_tables 4 --dtype bf16
  gen kaggle_s kaggle 0.01
  gen kaggle_fp16 kaggle 0.001 --dtype fp16 --dynamic_tables 3
  gen terabyte_s terabyte 0.001
  gen mlperf_s mlperf 0.0005
  for m in ${ENGINE_MODELS:-mini mini8 mini16dyn kaggle_s kaggle_fp16 terabyte_s mlperf_s}; do
    for b in 1 100 2048; do
      for math in fp32 tf32; do
        tol=1e-5; [ $math = tf32 ] && tol=1e-3
        r=$(run forward_bench --model "$work/models/$m/1" --request "$(reqs $m $b)" --math $math \
            --tolerance $tol --iters 5 --warmup 1 --label check 2>&1 | tail -1)
        echo "$r" >> "$out/engine.log"
        row "engine $m b=$b $math" "$(echo "$r" | grep -oE 'max_rel_err=[^ ]+ .*(PASS|FAIL)$' | sed 's/forward_us=.* stages_us=/stages_us=/' || echo "ERROR: $r")"
      done
    done
  done
fi

# --- host: tables in pinned host memory (placement HOST) behind the HBM cache -
# Every preset, caches of 0% (all host reads), 10% and 100% of the rows,
# refreshed between runs: scores must equal the all-in-HBM engine bit for bit.
if want host; then
  gen mini mini 1
  gen mini16dyn mini 1 --num_tables 16 --dynamic_tables 4 --dtype bf16
  gen kaggle_s kaggle 0.01
  gen kaggle_fp16 kaggle 0.001 --dtype fp16 --dynamic_tables 3
  gen terabyte_s terabyte 0.001
  gen mlperf_s mlperf 0.0005
  for m in ${HOST_MODELS:-mini mini16dyn kaggle_s kaggle_fp16 terabyte_s mlperf_s}; do
    for frac in 0 0.1 1; do
      r=$(run forward_bench --model "$work/models/$m/1" --request "$(reqs $m 2048)" --math fp32 \
          --tolerance 1e-5 --iters 5 --warmup 1 --host_cache_fraction $frac --label host 2>&1 | tail -1)
      echo "$r" >> "$out/host.log"
      row "host $m cache=$frac" "$(echo "$r" | grep -oE 'host_exact=[^ ]+ last_hit_rate=[^ ]+ (PASS|FAIL)$' || echo "ERROR: $r")"
    done
  done
fi

# --- cache: lookup keys/s with HOST tables behind caches of 100/50/10/1% ------
if want cache; then
  [ -x "$bundle/bin/cache_bench" ] && run cache_bench ${CACHE_BENCH_FLAGS:-} > "$out/cache_bench.log" 2>&1
  row "cache_bench" "rc $? ($(grep -oE 'outputs [a-zA-Z ]+ the all-in-HBM' "$out/cache_bench.log"))"
  while read -r l; do row "cache" "$l"; done < <(sed -n '/^==== cache_bench/,$p' "$out/cache_bench.log" | grep '^zipf')
fi

# --- cachesweep: cache_bench once per flag set (issue 5) ----------------------
# CACHE_SWEEP: flag sets separated by ';' (default: 10% caches at Zipf 1.05 by
# batch size, with the same number of warm-up accesses, and with ranks = rows);
# a set may start with NAME=VALUE environment settings.
if want cachesweep; then
  IFS=';' read -r -a sets <<< "${CACHE_SWEEP:-"--batch 4096;--batch 16384 --warmup_batches 40 --staging_mib 512;--batch 4096 --scatter=false"}"
  i=0
  for flags in "${sets[@]}"; do
    i=$((i + 1))
    # Leading NAME=VALUE words are environment settings (e.g. RANKD_GATHER_BLOCKS=66).
    envs=() rest=()
    for w in $flags; do
      if [ ${#rest[@]} = 0 ] && [[ $w =~ ^[A-Z_]+= ]]; then envs+=("$w"); else rest+=("$w"); fi
    done
    env "${envs[@]}" "$bundle/run" cache_bench --alphas 1.05 --fractions 0.1 --hbm=false "${rest[@]}" \
      > "$out/cachesweep_$i.log" 2>&1
    row "cachesweep $i: $flags" "rc $?"
    while read -r l; do row "cachesweep $i" "$l"; done < <(sed -n '/^==== cache_bench/,$p' "$out/cachesweep_$i.log" | grep '^zipf')
  done
fi

# --- hostread: GPU gathers from pinned host memory (issue 5) -------------------
# host_read_bench (mmap + THP, registered) at HOSTREAD_GIB GiB for each row count
# in HOSTREAD_ROWS, each with the grid caps in HOSTREAD_BLOCKS (0 = uncapped):
# how the host address span in flight at once sets the gather's speed.
if want hostread; then
  for r in ${HOSTREAD_ROWS:-16384 32768 131072 524288}; do
    run host_read_bench --kinds thp --sizes_gib "${HOSTREAD_GIB:-24}" --rows "$r" \
      --blocks "${HOSTREAD_BLOCKS:-0}" > "$out/hostread_$r.log" 2>&1
    while read -r l; do row "hostread rows $r" "$l"; done < <(sed -n '/^==== host_read_bench/,$p' "$out/hostread_$r.log" | grep 'GB/s')
  done
fi

# --- serve: rankd serve --backend cuda end to end -----------------------------
if want serve; then
  bash tests/gpu/serve_check.sh "$bundle" "$work/serve" > "$out/serve_check.log" 2>&1
  row "serve --backend cuda checks" "$(grep -c ^PASS "$out/serve_check.log") passed, $(grep -c ^FAIL "$out/serve_check.log") failed"
fi

# --- servelat: client-measured latency of rankd serve --backend cuda ---------
if want servelat; then
  gen mini mini 1
  gen kaggle kaggle 1
  for spec in "mini 1" "kaggle 1" "kaggle 256"; do
    set -- $spec
    run rankd gen-requests --model "$work/models/$1/1" --count 200 --candidates "$2" --seed 11 \
      --output "$work/lat_$1_$2.jsonl"
  done
  # A model root with just these two (hard links: no copy of the 2 GB table file).
  for m in mini kaggle; do
    mkdir -p "$work/latroot/$m/1"
    ln -f "$work/models/$m/1/model.pbtxt" "$work/models/$m/1/weights.safetensors" "$work/latroot/$m/1/"
  done
  rm -f "$work/lat.ports"
  "$bundle/run" rankd serve --model_root "$work/latroot" --backend cuda --host 127.0.0.1 \
    --grpc_port 0 --metrics_port -1 --admin_port -1 --http_port -1 --port_file "$work/lat.ports" > "$out/servelat_rankd.log" 2>&1 &
  lat_pid=$!
  for _ in $(seq 600); do [ -s "$work/lat.ports" ] && break; sleep 0.2; done
  port=$(sed -n 's/grpc_port=//p' "$work/lat.ports")
  for spec in "mini 1" "kaggle 1" "kaggle 256"; do
    set -- $spec
    r=$(run serve_bench --target "127.0.0.1:$port" --requests "$work/lat_$1_$2.jsonl" \
        --concurrency 1 --duration_s 5 --label "$1 B=$2" 2>&1 | tail -1)
    echo "$r" >> "$out/servelat.log"
    row "serve cuda $1 B=$2 conc 1" "$(echo "$r" | grep -oE 'p50 +[0-9.]+ us +p90 +[0-9.]+ us +p99 +[0-9.]+ us')"
  done
  for c in 16 64; do
    r=$(run serve_bench --target "127.0.0.1:$port" --requests "$work/lat_kaggle_1.jsonl" \
        --concurrency $c --connections 4 --duration_s 5 --label "kaggle B=1" 2>&1 | tail -1)
    echo "$r" >> "$out/servelat.log"
    row "serve cuda kaggle B=1 conc $c" "$(echo "$r" | grep -oE '[0-9]+ req/s.*p99 +[0-9.]+ us')"
  done
  kill -TERM $lat_pid; wait $lat_pid
fi

# --- oversize: a model larger than the GPU's free memory ---------------------
# PyTorch holds all but ~3 GiB of the GPU (a plain device allocation, not
# managed memory; rankd keeps 2 GiB of what is free for its workers, so its
# budget is ~1 GiB). The full-size kaggle model (~2.2 GB of tables) then
#   (a) with every table placed DEVICE must be refused with the numbers
#       (exit code, no crash);
#   (b) with placement AUTO must serve, its big tables in pinned host memory
#       behind the HBM cache, and answer a request like the CPU engine would.
if want oversize; then
  gen kaggle kaggle 1
  for v in device auto; do
    mkdir -p "$work/big_$v/kaggle/1"
    ln -f "$work/models/kaggle/1/weights.safetensors" "$work/big_$v/kaggle/1/"
    cp "$work/models/kaggle/1/model.pbtxt" "$work/big_$v/kaggle/1/"
  done
  sed -i 's/^  pooling: \(.*\)$/  pooling: \1\n  placement: DEVICE/' "$work/big_device/kaggle/1/model.pbtxt"
  run rankd gen-requests --model "$work/models/kaggle/1" --count 20 --candidates 64 --seed 5 \
    --output "$work/big.req.jsonl"
  run rankd score --model "$work/models/kaggle/1" --input "$work/big.req.jsonl" \
    --output "$work/big.cpu.jsonl" > /dev/null 2>&1
  hold="$work/hold.txt"; rm -f "$hold"
  HOLD_FILE="$hold" python3 -c '
import os, time, torch
free, total = torch.cuda.mem_get_info()
x = torch.empty(free - (3 << 30), dtype=torch.uint8, device="cuda")
free2, _ = torch.cuda.mem_get_info()
open(os.environ["HOLD_FILE"], "w").write("free before %.2f GiB, left %.2f GiB\n" % (free / 2**30, free2 / 2**30))
time.sleep(600)' > "$out/oversize_holder.log" 2>&1 &
  holder=$!
  for _ in $(seq 300); do [ -s "$hold" ] && break; sleep 0.2; done
  "$bundle/run" rankd serve --model_root "$work/big_device" --backend cuda --host 127.0.0.1 \
    --grpc_port 0 --metrics_port -1 --admin_port -1 --http_port -1 --model_control none > "$out/oversize_device.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "does not fit" "$out/oversize_device.log"; then
    row "oversize DEVICE-placed model refused" "PASS (rc $rc; $(cat "$hold" 2>/dev/null))"
  else
    row "oversize DEVICE-placed model refused" "FAIL (rc $rc): $(tail -2 "$out/oversize_device.log" | tr '\n' ' ')"
  fi
  grep -m1 -oE 'does not fit.*' "$out/oversize_device.log" >> "$table"
  rm -f "$work/big.ports"
  "$bundle/run" rankd serve --model_root "$work/big_auto" --backend cuda --host 127.0.0.1 \
    --grpc_port 0 --metrics_port -1 --admin_port -1 --http_port -1 --port_file "$work/big.ports" > "$out/oversize_auto.log" 2>&1 &
  big_pid=$!
  for _ in $(seq 600); do [ -s "$work/big.ports" ] && break; kill -0 $big_pid 2>/dev/null || break; sleep 0.2; done
  if [ -s "$work/big.ports" ]; then
    port=$(sed -n 's/grpc_port=//p' "$work/big.ports")
    run rankctl score --target "127.0.0.1:$port" --input "$work/big.req.jsonl" \
      --output "$work/big.gpu.jsonl" > /dev/null 2> "$out/oversize_rankctl.err"
    r=$(python3 tests/gpu/compare_scores.py "$work/big.cpu.jsonl" "$work/big.gpu.jsonl" 1e-5 2>&1)
    row "oversize AUTO model served from host memory" "$r"
    kill -TERM $big_pid; wait $big_pid
  else
    row "oversize AUTO model served from host memory" "FAIL: not serving: $(tail -2 "$out/oversize_auto.log" | tr '\n' ' ')"
    kill $big_pid 2>/dev/null; wait $big_pid 2>/dev/null
  fi
  kill $holder 2>/dev/null; wait $holder 2>/dev/null
fi

# Starts rankd serve on a model root (extra flags after it), waits until it
# serves (or exits); sets srv_pid, srv_port, srv_mport. Log: $out/$1.log.
serve_up() {  # name root [flags]
  local name=$1 root=$2; shift 2
  rm -f "$work/$name.ports"
  "$bundle/run" rankd serve --model_root "$root" --backend "${RANKD_BACKEND:-cuda}" --host 127.0.0.1 \
    --grpc_port 0 --metrics_port 0 --admin_port 0 --http_port 0 --port_file "$work/$name.ports" "$@" > "$out/$name.log" 2>&1 &
  srv_pid=$!
  for _ in $(seq 1500); do [ -s "$work/$name.ports" ] && break; kill -0 $srv_pid 2>/dev/null || break; sleep 0.2; done
  srv_port=$(sed -n 's/grpc_port=//p' "$work/$name.ports" 2>/dev/null)
  srv_mport=$(sed -n 's/metrics_port=//p' "$work/$name.ports" 2>/dev/null)
  srv_aport=$(sed -n 's/admin_port=//p' "$work/$name.ports" 2>/dev/null)
  [ -n "$srv_port" ]
}
# Sum of a metric over its series on the running server.
metric_sum() { curl -s "127.0.0.1:$srv_mport/metrics" | awk -v m="$1" '$1 ~ "^"m"({|$)" {s += $2} END {printf "%.0f", s}'; }

# --- bigserve: full-size models with tables in host memory behind the cache -
# mlperf (DLRMv2, 204 M rows) in fp16 (~49 GiB of rows, init RANDOM: made at
# load, pinned in place) with an 8 GB device budget; terabyte in fp32 with a
# budget of 10% of its bytes. 256-candidate requests with Zipf(1.05) ids:
# latency at 1 in flight, then sustained candidates/s at 8 in flight.
if want bigserve; then
  run rankd gen-model --preset mlperf --dtype fp16 --init random --out "$work/bigm/mlperf/1" > /dev/null 2>&1
  run rankd gen-model --preset terabyte --dtype fp32 --init random --out "$work/bigt/terabyte/1" > /dev/null 2>&1
  tb_bytes=$(run rankd inspect --model "$work/bigt/terabyte/1" --json | python3 -c '
import json, sys
c = json.load(sys.stdin)
print(sum(int(t["num_rows"]) * int(t["dim"]) * 4 for t in c["tables"]))')
  tb_budget=$(( tb_bytes / 10 ))
  # BIGSERVE_SPECS: "model dir budget tag [rankd flags...]" separated by ';'
  # (budget TB10 = 10% of terabyte's bytes). Default: each model with the
  # shared HBM cache and with a cache per table (A/B in one run).
  IFS=';' read -r -a specs <<< "${BIGSERVE_SPECS:-"mlperf bigm 8G shared;mlperf bigm 8G pertable --host_cache_shared=false;terabyte bigt TB10 shared;terabyte bigt TB10 pertable --host_cache_shared=false"}"
  for spec in "${specs[@]}"; do
    set -- $spec
    m=$1 root=$work/$2 budget=$3 tag=${1}_$4
    shift 4
    [ "$budget" = TB10 ] && budget=$tb_budget
    run rankd gen-requests --model "$root/$m/1" --count 100 --candidates 256 --zipf 1.05 --seed 3 \
      --output "$work/$m.big.jsonl" > /dev/null 2>&1
    t0=$(date +%s)
    if serve_up "bigserve_$tag" "$root" --device_memory_budget "$budget" "$@"; then
      row "bigserve $tag budget $budget" "serving after $(( $(date +%s) - t0 )) s; $(grep -m1 -oE 'HBM [0-9.]+ [GMK]iB of budget [0-9.]+ [GMK]iB; pinned host memory [0-9.]+ [GMK]iB' "$out/bigserve_$tag.log")"
      run serve_bench --target "127.0.0.1:$srv_port" --requests "$work/$m.big.jsonl" --concurrency 1 \
        --duration_s 8 --label "$m B=256 conc 1" > "$out/bigserve_${tag}_c1.log" 2>&1
      run serve_bench --target "127.0.0.1:$srv_port" --requests "$work/$m.big.jsonl" --concurrency 8 \
        --connections 4 --duration_s 8 --label "$m B=256 conc 8" > "$out/bigserve_${tag}_c8.log" 2>&1
      row "bigserve $tag B=256 conc 1" "$(tail -1 "$out/bigserve_${tag}_c1.log" | grep -oE 'p50 +[0-9.]+ us +p90 +[0-9.]+ us +p99 +[0-9.]+ us')"
      row "bigserve $tag B=256 conc 8" "$(tail -1 "$out/bigserve_${tag}_c8.log" | grep -oE '[0-9]+ req/s +[0-9]+ cand/s.*p99 +[0-9.]+ us')"
      h=$(metric_sum rankd_embedding_cache_hits_total); mi=$(metric_sum rankd_embedding_cache_misses_total)
      row "bigserve $tag cache" "hits $h misses $mi hit rate $(python3 -c "print(round($h / max(1, $h + $mi), 4))") host read bytes $(metric_sum rankd_embedding_host_read_bytes_total)"
      curl -s "127.0.0.1:$srv_mport/metrics" > "$out/bigserve_${tag}_metrics.txt"
      kill -TERM $srv_pid; wait $srv_pid
    else
      row "bigserve $tag budget $budget" "FAIL: $(tail -3 "$out/bigserve_$tag.log" | tr '\n' ' ')"
      kill $srv_pid 2>/dev/null; wait $srv_pid 2>/dev/null
    fi
    grep -E 'loaded|load|placement' "$out/bigserve_$tag.log" | head -5 >> "$out/bigserve_load.txt"
  done
  rm -rf "$work/bigm" "$work/bigt"
fi

# --- dyn100m: a dynamic (hash) table of 100 M keys loads and serves ----------
if want dyn100m; then
  run rankd gen-model --preset mini --init random --dynamic_tables 1 --out "$work/dyn/mini/1" > /dev/null 2>&1
  python3 - "$work/dyn/mini/1/model.pbtxt" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
# the DYNAMIC table: 100 M keys (capacity back to its default)
s = re.sub(r'(kind: DYNAMIC\n  num_rows: )\d+', r'\g<1>100000000', s, count=1)
s = re.sub(r'\n  capacity: \d+', '', s)
open(p, "w").write(s)
PY
  run rankd gen-requests --model "$work/dyn/mini/1" --count 200 --candidates 256 --seed 4 \
    --output "$work/dyn.jsonl" > /dev/null 2>&1
  # dyn_serve NAME ROOT REQUESTS LABEL: serve ROOT, log its GPU build line,
  # then 256-candidate requests at 8 in flight.
  dyn_serve() {
    local name=$1 root=$2 reqs=$3 label=$4 t0
    t0=$(date +%s)
    if serve_up "$name" "$root"; then
      row "$label serving" "after $(( $(date +%s) - t0 )) s; $(grep -m1 -oE 'built on the GPU: .*' "$out/$name.log")"
      run serve_bench --target "127.0.0.1:$srv_port" --requests "$reqs" --concurrency 8 \
        --connections 4 --duration_s 5 --label "$label B=256" > "$out/${name}_c8.log" 2>&1
      row "$label B=256 conc 8" "$(tail -1 "$out/${name}_c8.log" | grep -oE '[0-9]+ req/s +[0-9]+ cand/s.*p99 +[0-9.]+ us')"
      row "$label ids missing / scored" "$(metric_sum rankd_ids_missing_total) / $(metric_sum rankd_candidates_total) candidates"
      kill -TERM $srv_pid; wait $srv_pid
    else
      row "$label serving" "FAIL: $(tail -3 "$out/$name.log" | tr '\n' ' ')"
      kill $srv_pid 2>/dev/null; wait $srv_pid 2>/dev/null
    fi
    grep -iE 'load|hash' "$out/$name.log" | head -8 > "$out/${name}_load.txt"
  }
  dyn_serve dyn100m "$work/dyn" "$work/dyn.jsonl" dyn100m
  # The same table with its keys read from the weights file (mapped read-only).
  run rankd gen-model --preset mini --dynamic_tables 1 --out "$work/dynf/mini/1" > /dev/null 2>&1
  python3 tests/gpu/make_dyn_file.py "$work/dynf/mini/1" 100000000 > "$out/dyn100m_file_make.log" 2>&1
  run rankd gen-requests --model "$work/dynf/mini/1" --count 200 --candidates 256 --seed 4 \
    --output "$work/dynf.jsonl" > /dev/null 2>&1
  dyn_serve dyn100m_file "$work/dynf" "$work/dynf.jsonl" "dyn100m keys from file"
  rm -rf "$work/dynf" "$work/dyn"
  [ -x "$bundle/bin/lookup_bench" ] && run lookup_bench --pooled=false --hash_slots 268435456 \
    --hash_queries 16777216 > "$out/hash268m.log" 2>&1 &&
    row "hash lookup, 268 M slots" "$(grep -E '^\| hash' "$out/hash268m.log" | cut -d'|' -f2-4 | tr '\n' ';')"
fi

# --- loadprobe: is the load generator or rankd the limit? ------------------
# kaggle (full size), 1-candidate requests: serve_bench and rankload closed
# loop at the same concurrency, then rankload open loop at rising rates with
# more sender threads and connections.
if want loadprobe; then
  gen kaggle kaggle 1
  mkdir -p "$work/probe/kaggle/1"
  ln -f "$work/models/kaggle/1/model.pbtxt" "$work/models/kaggle/1/weights.safetensors" "$work/probe/kaggle/1/"
  run rankd gen-requests --model "$work/models/kaggle/1" --count 1000 --candidates 1 --seed 12 \
    --output "$work/probe1.jsonl" > /dev/null 2>&1
  if serve_up loadprobe "$work/probe"; then
    r=$(run serve_bench --target "127.0.0.1:$srv_port" --requests "$work/probe1.jsonl" \
        --concurrency 64 --connections 8 --duration_s 5 --label "kaggle B=1" 2>&1 | tail -1)
    row "probe serve_bench closed 64" "$(echo "$r" | grep -oE '[0-9]+ req/s.*p99 +[0-9.]+ us')"
    for spec in "closed 64 8 4" "open 20000 16 8" "open 40000 32 16"; do
      set -- $spec
      if [ "$1" = closed ]; then
        flags=(--mode closed --concurrency "$2")
      else
        flags=(--mode open --rate "$2")
      fi
      run rankload --target "127.0.0.1:$srv_port" --requests "$work/probe1.jsonl" "${flags[@]}" \
        --connections "$3" --threads "$4" --duration_s 5 --warmup_s 1 --quiet \
        --json "$out/probe_$1_$2.json" > "$out/probe_$1_$2.txt" 2>&1
      row "probe rankload $1 $2 (conn $3, threads $4)" "$(python3 -c '
import json, sys
st = json.load(open(sys.argv[1]))["steps"][-1]
l, v = st["latency_us"], st["service_us"]
print("achieved %.0f req/s (target %s) p50 %.0f us p99 %.0f us; service p50 %.0f p99 %.0f; errors %d; late sends %d; behind %s" % (
    st["achieved_rps"], st["target_rps"], l["p50"], l["p99"], v["p50"], v["p99"], st["errors"], st["late_sends"], st["client_behind"]))' "$out/probe_$1_$2.json" 2>&1 | head -c 300)"
    done
    kill -TERM $srv_pid; wait $srv_pid
  else
    row "loadprobe" "FAIL: $(tail -2 "$out/loadprobe.log" | tr '\n' ' ')"
  fi
fi

# --- workersweep: 1-candidate throughput vs GPU workers and connections -----
if want workersweep; then
  gen kaggle kaggle 1
  mkdir -p "$work/sweep/kaggle/1"
  ln -f "$work/models/kaggle/1/model.pbtxt" "$work/models/kaggle/1/weights.safetensors" "$work/sweep/kaggle/1/"
  run rankd gen-requests --model "$work/models/kaggle/1" --count 1000 --candidates 1 --seed 12 \
    --output "$work/sweep1.jsonl" > /dev/null 2>&1
  for w in ${SWEEP_WORKERS:-1 2 4 8}; do
    if serve_up "sweep_w$w" "$work/sweep" --gpu_workers "$w"; then
      for cc in "64 4" "64 16" "256 16"; do
        set -- $cc
        r=$(run serve_bench --target "127.0.0.1:$srv_port" --requests "$work/sweep1.jsonl" \
            --concurrency "$1" --connections "$2" --duration_s 4 --label "kaggle B=1" 2>&1 | tail -1)
        row "sweep workers $w conc $1 conn $2" "$(echo "$r" | grep -oE '[0-9]+ req/s.*p99 +[0-9.]+ us')"
      done
      curl -s "127.0.0.1:$srv_mport/metrics" | grep -E '^rankd_batch_requests_(sum|count)\{model="kaggle"' > "$out/sweep_w${w}_batch.txt"
      row "sweep workers $w mean requests/batch" "$(awk '/_sum/ {s=$2} /_count/ {c=$2} END {if (c > 0) printf "%.2f over %d batches", s / c, c}' "$out/sweep_w${w}_batch.txt")"
      kill -TERM $srv_pid; wait $srv_pid
    else
      row "sweep workers $w" "FAIL: $(tail -2 "$out/sweep_w$w.log" | tr '\n' ' ')"
    fi
  done
fi

# --- hostpath: per-request host cost, 1-candidate requests (issue 6) ---------
# bench/host_path.sh on kaggle (scale HOSTPATH_SCALE, default 0.01: the tables'
# size does not matter for the host path), one GPU worker, answering on the
# worker thread (--completion_threads 0) and on 2 / 4 completion threads.
# HOSTPATH_CANDIDATES (1), HOSTPATH_RATES (10000,20000), HOSTPATH_REPEAT (3),
# HOSTPATH_PARTS (a,b,c) and HOSTPATH_GPU_WORKERS (1) change the runs.
if want hostpath; then
  for ct in ${HOSTPATH_COMPLETION:-0 2 4}; do
    bash bench/host_path.sh --rankd "$bundle/bin/rankd" --rankload "$bundle/bin/rankload" \
      --serve_bench "$bundle/bin/serve_bench" --backend cuda --preset kaggle --num_tables 0 \
      --scale "${HOSTPATH_SCALE:-0.01}" --work "$work/hostpath" --rates "${HOSTPATH_RATES:-10000,20000}" \
      --repeat "${HOSTPATH_REPEAT:-3}" --candidates "${HOSTPATH_CANDIDATES:-1}" --parts "${HOSTPATH_PARTS:-a,b,c}" \
      --concurrency 64,256 --connections 16 --threads 4 --low_rps 200 \
      --serve_flags "--gpu_workers ${HOSTPATH_GPU_WORKERS:-1} --completion_threads $ct" \
      --label "completion_threads $ct" --out "$out/hostpath_ct$ct" > "$out/hostpath_ct$ct.log" 2>&1
    while read -r l; do row "hostpath ct=$ct" "$l"; done < "$out/hostpath_ct$ct/summary.txt"
  done
fi

# --- floor: where low-load latency goes (issue 6) -----------------------------
# One rankd (kaggle scale 0.01, CUDA, 1 GPU worker) per server setting; from a
# client on the same machine, one call at a time: GetModelInfo (gRPC round trip
# through the same server, no batcher or GPU: the floor) and Score, blocking
# calls back to back and FLOOR_PAUSE_US apart (threads go idle as at low load),
# and both again through the client's callback API (its own floor: the two
# client APIs differ in their own cost, so Score is compared with the floor of
# the same API); a health check (a floor without GetModelInfo's per-feature
# answer); then rankload's open loop at 200 req/s.
# FLOOR_SERVERS: space-separated NAME:FLAGS settings, FLAGS without spaces
# (e.g. "ct2:--completion_threads=2 spin200:--worker_spin_us=200").
if want floor; then
  gen kaggle_s kaggle 0.01
  f1=$(reqs kaggle_s 1)
  for spec in ${FLOOR_SERVERS:-"ct2:--completion_threads=2" "ct2_noinline:--completion_threads=2 --completion_inline_when_idle=false" "ct0:--completion_threads=0"}; do
    name=${spec%%:*} flags=${spec#*:}
    if ! serve_up "floor_$name" "$work/models" --gpu_workers 1 --log_level warn $flags; then
      row "floor $name" "FAIL: $(tail -3 "$out/floor_$name.log" | tr '\n' ' ')"
      kill $srv_pid 2>/dev/null; wait $srv_pid 2>/dev/null
      continue
    fi
    for probe in "health 0" "model_info 0" "model_info ${FLOOR_PAUSE_US:-2000}" "score_sync 0" "score_sync ${FLOOR_PAUSE_US:-2000}" "model_info_async 0" "score 0"; do
      set -- $probe
      run serve_bench --target "127.0.0.1:$srv_port" --requests "$f1" --rpc "$1" --pause_us "$2" \
        --concurrency 1 --duration_s 4 --label "$name $1 pause $2" >> "$out/floor.log" 2>&1
      row "floor $name $1 pause $2" "$(tail -1 "$out/floor.log" | grep -oE 'p50 +[0-9.]+ us +p90 +[0-9.]+ us +p99 +[0-9.]+ us')"
    done
    run rankload --target "127.0.0.1:$srv_port" --model kaggle_s --model_config "$work/models/kaggle_s/1/model.pbtxt" \
      --mode open --rate 200 --duration_s 5 --warmup_s 1 --connections 4 --threads 2 --quiet \
      --json "$out/floor_${name}_rankload.json" > "$out/floor_${name}_rankload.txt" 2>&1
    row "floor $name rankload open 200/s" "$(python3 -c "
import json
s = json.load(open('$out/floor_${name}_rankload.json'))['steps'][0]
l, v = s['latency_us'], s['service_us']
print('p50 %.1f us p99 %.1f us (service p50 %.1f us)' % (l['p50'], l['p99'], v['p50']))" 2>&1 | tail -1)"
    curl -s "127.0.0.1:$srv_mport/metrics" > "$out/floor_${name}_metrics.txt"
    kill -TERM $srv_pid; wait $srv_pid
  done
fi

# --- sweep: open-loop rate sweeps, kaggle at full size (issue 6) --------------
# rankd with its defaults; rankload open loop at fixed rates (SWEEP_RATES_1 for
# 1-candidate requests, SWEEP_RATES_256 for 256-candidate ones), SWEEP_DURATION_S (3) measured
# after 1 s of warm-up each: p50 / p99 per rate, where the SLO search's first
# failing probe may hide passing rates above it (p99 here is not monotonic in
# the rate: at moderate rates threads sleep between requests and pay wake-ups).
# SWEEP_SIZES ("1 256"): request sizes swept, each on a fresh server (overload
# steps leave a backlog that would poison the next sweep). SWEEP_SERVERS: one
# sweep set per NAME:FLAGS server setting, FLAGS separated by commas (e.g.
# "w2:--gpu_workers=2 w4:--gpu_workers=4,--completion_threads=4"); default one
# server with SWEEP_SERVE_FLAGS. SWEEP_RANKLOAD_FLAGS: more rankload flags
# (e.g. "--drain_s 0").
if want sweep; then
  gen kaggle_full kaggle 1
  for spec in ${SWEEP_SERVERS:-"default:${SWEEP_SERVE_FLAGS:-}"}; do
    name=${spec%%:*} flags=${spec#*:}
    for size in ${SWEEP_SIZES:-1 256}; do
      tag="sweep_${name}_$size"
      # shellcheck disable=SC2086
      if ! serve_up "$tag" "$work/models" ${flags//,/ }; then
        row "sweep $name B=$size" "FAIL: $(tail -3 "$out/$tag.log" | tr '\n' ' ')"
        kill $srv_pid 2>/dev/null; wait $srv_pid 2>/dev/null
        continue
      fi
      if [ "$size" = 1 ]; then rates=${SWEEP_RATES_1:-5000,10000,20000,40000,60000,80000,100000}
      else rates=${SWEEP_RATES_256:-1000,2000,4000,8000,12000,16000,24000}; fi
      run rankload --target "127.0.0.1:$srv_port" --model kaggle_full \
        --model_config "$work/models/kaggle_full/1/model.pbtxt" --candidates "$size" --mode open \
        --rate "$rates" --duration_s ${SWEEP_DURATION_S:-3} --warmup_s 1 --connections ${SWEEP_CONNECTIONS:-16} \
        --threads ${SWEEP_THREADS:-4} --quiet --metrics_url "http://127.0.0.1:$srv_mport/metrics" \
        ${SWEEP_RANKLOAD_FLAGS:-} --csv "$out/$tag.csv" --json "$out/$tag.json" > "$out/$tag.txt" 2>&1
      python3 - "$out/$tag.csv" "$size" <<'PY' | while read -r l; do row "sweep $name" "$l"; done
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print("B=%s target %6s achieved %8.0f req/s %10.0f cand/s p50 %7.0f us p99 %8.0f us server p99 %7.0f us%s" % (
        sys.argv[2], r["target_rps"], float(r["achieved_rps"]), float(r["candidates_per_s"]),
        float(r["latency_p50_us"]), float(r["latency_p99_us"]),
        float(r["server_p99_request_us"] or 0), " CLIENT BEHIND" if r["client_behind"] == "1" else ""))
PY
      kill -TERM $srv_pid; wait $srv_pid
    done
  done
fi

# --- protocols: rankd Score vs KServe ModelInfer vs HTTP JSON (issue 19) -----
# bench/protocols.sh on the CUDA backend: the same requests through each front
# end, closed loop; server and client on separate cores. PROTOCOLS_CASES
# ("mini:1 mini:64 kaggle:256"), PROTOCOLS_SCALE (kaggle scale, 1),
# PROTOCOLS_CONCURRENCY (32), PROTOCOLS_REPEAT (3), PROTOCOLS_DURATION (5),
# PROTOCOLS_LIST ("rankd kserve http").
# PROTOCOLS_BACKENDS ("cuda cpu"): the CPU backend's run uses the same cores.
if want protocols; then
  half=$(( $(nproc) / 2 ))
  for be in ${PROTOCOLS_BACKENDS:-cuda cpu}; do
  bash bench/protocols.sh --rankd "$bundle/bin/rankd" --rankload "$bundle/bin/rankload" \
    --backend "$be" --cases "${PROTOCOLS_CASES:-mini:1 mini:64 kaggle:256}" --protocols "${PROTOCOLS_LIST:-rankd kserve http}" \
    --kaggle_scale "${PROTOCOLS_SCALE:-1}" --concurrency "${PROTOCOLS_CONCURRENCY:-32}" \
    --repeat "${PROTOCOLS_REPEAT:-3}" --duration_s "${PROTOCOLS_DURATION:-5}" \
    --server_cpus "0-$((half - 1))" --client_cpus "$half-$(( $(nproc) - 1 ))" \
    --work "$work/protocols" --out "$out/protocols_$be" > "$out/protocols_$be.log" 2>&1
  row "protocols $be (rc $?)" "see protocols_$be/summary.tsv"
  [ -f "$out/protocols_$be/summary.tsv" ] &&
    while read -r l; do row "protocols $be" "$l"; done < "$out/protocols_$be/summary.tsv"
  done
fi

# --- slo: rankload SLO report, kaggle preset, CUDA backend (issue 6) ---------
if want slo; then
  bash bench/slo_report.sh --rankd "$bundle/bin/rankd" --rankload "$bundle/bin/rankload" \
    --out "$out/slo_report" --backend cuda ${SLO_FLAGS:-} > "$out/slo_report.log" 2>&1
  row "slo report (rc $?)" "see slo_report/summary.txt"
  [ -f "$out/slo_report/summary.txt" ] && while read -r l; do row "slo" "$l"; done < "$out/slo_report/summary.txt"
fi

# --- bench: engine forward vs PyTorch on the same weights and inputs ----------
if want bench; then
  bench_pair() {  # name batch math [torch flags]
    local m=$1 b=$2 math=$3; shift 3
    local f; f=$(reqs "$m" "$b")
    local r t
    r=$(run forward_bench --model "$work/models/$m/1" --request "$f" --math "$math" \
        --tolerance 1 --label "$m" 2>&1 | tail -1)
    echo "$r" >> "$out/bench.log"
    t=$(python3 bench/gpu/torch_bench.py forward --model "$work/models/$m/1" --config "$work/$m.json" \
        --request "$f" --math "$math" --label "$m" "$@" 2>> "$out/torch_err.log")
    echo "$t" >> "$out/bench.log"
    local fw ex eg cg cd
    fw=$(echo "$r" | grep -oE 'forward_us=[0-9.]+' | cut -d= -f2)
    ex=$(echo "$r" | grep -oE 'execute_us=[0-9.]+' | cut -d= -f2)
    eg=$(echo "$t" | grep 'variant=eager' | grep -oE 'us=[0-9.]+' | cut -d= -f2)
    cg=$(echo "$t" | grep 'variant=cuda_graph' | grep -oE 'us=[0-9.]+' | cut -d= -f2)
    cd=$(echo "$t" | grep 'variant=compile_default' | grep -oE ' us=[0-9.]+' | cut -d= -f2)
    local ma; ma=$(echo "$t" | grep 'variant=compile_max-autotune' | grep -oE ' us=[0-9.]+' | cut -d= -f2)
    row "bench $m b=$b $math" "rankd fwd ${fw}us (execute ${ex}us) | torch eager ${eg}us graph ${cg}us compile ${cd}us${ma:+ max-autotune ${ma}us}"
  }
  gen mini mini 1
  gen mini8 mini 1 --num_tables 8
  gen mini16 mini 1 --num_tables 16
  # torch.compile takes ~30 s per shape (max-autotune minutes): only on the
  # headline shapes; MAX_AUTOTUNE=1 adds max-autotune there.
  headline=(); [ "${MAX_AUTOTUNE:-0}" = 1 ] && headline=(--max-autotune)
  # BENCH_SHAPES="mini kaggle" picks the groups (e.g. one per call when
  # max-autotune makes a call long); KAGGLE_BATCHES the kaggle batches.
  if [[ " ${BENCH_SHAPES:-mini kaggle} " == *" mini "* ]]; then
    for b in 256 1024 4096; do bench_pair mini $b fp32 --no-compile; done
    bench_pair mini 2048 fp32 "${headline[@]}"
    bench_pair mini8 2048 fp32 --no-compile
    bench_pair mini16 2048 fp32 --no-compile
  fi
  if [[ " ${BENCH_SHAPES:-mini kaggle} " == *" kaggle "* ]]; then
    gen kaggle kaggle 1
    for b in ${KAGGLE_BATCHES:-256 2048 16384 65536}; do bench_pair kaggle $b tf32 "${headline[@]}"; done
    bench_pair kaggle 2048 fp32 --no-compile
  fi
fi

# --- lookup: pooled lookup and hash lookup vs embedding_bag and copy bandwidth -
if want lookup; then
  [ -x "$bundle/bin/lookup_bench" ] && run lookup_bench > "$out/lookup_bench.log" 2>&1
  python3 bench/gpu/torch_bench.py lookup > "$out/torch_lookup.log" 2>&1
  while read -r l; do row "lookup rankd" "$l"; done < <(grep -E "^RESULT|keys/s" "$out/lookup_bench.log" | tail -8)
  while read -r l; do row "lookup torch" "${l#TORCH lookup }"; done < <(grep ^TORCH "$out/torch_lookup.log")
fi

# --- lifecycle: model versions swapped under load (issue 15) ----------------
# For each LIFECYCLE_SPECS entry ("name preset budget rate candidates versions
# [gen-model flags]", ';'-separated): serve version 1 in poll mode (1 s polls),
# then for each next version run rankload open loop with --response_log,
# publish the version by rename mid-run, and check with lifecycle_util.py:
# zero failures, routing around READY, p99 from publication to 1 s after the
# old version's unload vs p99 before publication. GPU memory used (nvidia-smi)
# after each old version unloads vs the one-version level (goal: within 64 MiB).
lc_models_json() { run rankctl models --admin_target "127.0.0.1:$srv_aport" --model "$1" --json 2>/dev/null; }
# lc_wait MODEL VERSION STATE TIMEOUT_S: prints the state's start (unix ms).
lc_wait() {
  local i
  for ((i = 0; i < $4 * 10; i++)); do
    r=$(lc_models_json "$1" | python3 -c '
import json, sys
want_v, want_s = sys.argv[1], sys.argv[2]
for m in json.load(sys.stdin).get("models", []):
    for v in m.get("versions", []):
        if str(v["version"]) == want_v and v["state"] == want_s:
            print(v["stateSinceUnixMs"], v.get("loadSeconds", 0), v.get("warmupSeconds", 0))' "$2" "$3")
    [ -n "$r" ] && { echo "$r"; return 0; }
    sleep 0.1
  done
  return 1
}
gpu_used_mib() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; }
if want lifecycle; then
  IFS=';' read -r -a specs <<< "${LIFECYCLE_SPECS:-"kaggle kaggle - 1000 64 3;mlperf mlperf 8G 500 64 2 --dtype fp16 --init random"}"
  for spec in "${specs[@]}"; do
    set -- $spec
    m=$1 preset=$2 budget=$3 rate=$4 cands=$5 nver=$6
    shift 6
    root="$work/lc_$m" stage="$work/lc_stage_$m"
    rm -rf "$root" "$stage"
    for v in $(seq 1 "$nver"); do
      dir="$stage/$v"; [ "$v" = 1 ] && dir="$root/$m/1"
      run rankd gen-model --preset "$preset" --name "$m" --seed "$v" --out "$dir" "$@" > /dev/null 2>&1
    done
    flags=(--model_control poll --repository_poll_s 1 --log_level info)
    [ "$budget" != - ] && flags+=(--device_memory_budget "$budget")
    t0=$(date +%s)
    if ! serve_up "lc_$m" "$root" "${flags[@]}"; then
      row "lifecycle $m" "FAIL: not serving: $(tail -2 "$out/lc_$m.log" | tr '\n' ' ')"
      kill $srv_pid 2>/dev/null; wait $srv_pid 2>/dev/null; continue
    fi
    sleep 2
    base=$(gpu_used_mib)
    r1=$(lc_wait "$m" 1 READY 5)
    row "lifecycle $m v1" "serving after $(( $(date +%s) - t0 )) s; load/warm-up s: $(echo "$r1" | cut -d' ' -f2-); GPU used ${base} MiB"
    for v in $(seq 2 "$nver"); do
      old=$((v - 1))
      # Long enough for the new version to load beside the old one.
      dur=${LIFECYCLE_DURATION_S:-40}; [ "$preset" = mlperf ] && dur=${LIFECYCLE_BIG_DURATION_S:-120}
      run rankload --target "127.0.0.1:$srv_port" --model "$m" --mode open --rate "$rate" \
        --candidates "$cands" --duration_s "$dur" --warmup_s 0 --deadline_ms 10000 --quiet \
        --threads 4 --connections 8 --response_log "$work/lc_${m}_$v.csv" > "$out/lc_${m}_${v}_rankload.log" 2>&1 &
      lpid=$!
      sleep 8
      pub=$(date +%s%3N)
      mv "$stage/$v" "$root/$m/.$v.tmp" && mv "$root/$m/.$v.tmp" "$root/$m/$v"
      rv=$(lc_wait "$m" "$v" READY 300) || rv=""
      ro=$(lc_wait "$m" "$old" UNLOADED 120) || ro=""
      sleep 3
      used=$(gpu_used_mib)
      wait $lpid
      lrc=$?
      if [ -z "$rv" ] || [ -z "$ro" ]; then
        row "lifecycle $m v$old->v$v" "FAIL: READY '$rv' UNLOADED '$ro' (rankload rc $lrc)"; continue
      fi
      ready=${rv%% *} unl=${ro%% *}
      res=$(python3 tests/e2e/lifecycle_util.py swap --log "$work/lc_${m}_$v.csv" --old "$old" --new "$v" \
        --ready_ms "$ready" --publish_ms "$pub" --swapped_ms $((unl + 1000)) --poll_s 1 --min_calls 1000 2>"$out/lc_${m}_${v}_check.err")
      ok=$?
      cp "$work/lc_${m}_$v.csv" "$out/" 2>/dev/null
      row "lifecycle $m v$old->v$v" "$([ $ok = 0 ] && [ $lrc = 0 ] && echo PASS || echo "FAIL ($(head -2 "$out/lc_${m}_${v}_check.err" | tr '\n' ' '))") $res"
      row "lifecycle $m v$v load" "published->READY $(( ready - pub )) ms; load/warm-up s: $(echo "$rv" | cut -d' ' -f2-); old unloaded $(( unl - ready )) ms after; GPU used ${used} MiB (one-version level ${base}, diff $(( used - base )) MiB)"
    done
    curl -s "127.0.0.1:$srv_mport/metrics" | grep -E '^rankd_model_(loads_total|versions)' > "$out/lc_${m}_metrics.txt"
    kill -TERM $srv_pid; wait $srv_pid
    rm -rf "$root" "$stage"
  done
fi

# --- live: online embedding updates (issue 16) on the CUDA backend ----------
# Exactness: a kaggle-shaped model with two tables forced into pinned host
# memory behind the HBM cache, the rest in HBM; `rankctl update` of the
# largest static tables; scores vs `rankd score` (CPU) on the model with the
# delta applied by the test script (fp32, within 1e-5). Then the kernels'
# bench (dynamic_table_bench) and the end-to-end apply rate through gRPC
# (mlperf-shaped, dim 128 fp32, LIVE_ROWS rows into its largest table).
if want live; then
  util=tests/e2e/live_embeddings_util.py
  lm="$work/live/k/1"
  rm -rf "$work/live" "$work/live_exp"
  run rankd gen-model --preset kaggle --scale 0.01 --name k --seed 4 --out "$lm" > /dev/null 2>&1
  python3 - "$lm/model.pbtxt" <<'PYEOF'
import re, sys
p = sys.argv[1]
blocks = re.split(r"(?m)^tables \{", open(p).read())
big = sorted(range(1, len(blocks)), key=lambda i: -int(re.search(r"num_rows: (\d+)", blocks[i]).group(1)))
for i in big[1:3]:  # the 2nd and 3rd largest: HOST, behind the cache
    blocks[i] = blocks[i].replace("\n  dim:", "\n  placement: HOST\n  dim:", 1)
open(p, "w").write("tables {".join(blocks))
PYEOF
  python3 $util make-delta-static "$lm" "$work/live_delta.safetensors" "$work/live_side.json" 3 200 4
  python3 $util apply-delta "$lm" "$work/live_delta.safetensors" "$work/live_exp" 2> "$out/live_apply.err"
  run rankd gen-requests --model "$lm" --count 30 --candidates 16 --seed 5 --output "$work/live_req0.jsonl"
  python3 $util touch-requests "$work/live_req0.jsonl" "$work/live_side.json" "$work/live_req.jsonl"
  run rankd score --model "$work/live_exp" --input "$work/live_req.jsonl" --output "$work/live_want.jsonl" 2> "$out/live_score.err"
  if serve_up live "$work/live" --device_memory_budget 64M --log_level info; then
    run rankctl update --admin_target "127.0.0.1:$srv_aport" --model k \
      --input "$work/live_delta.safetensors" --producer_id gpu > "$out/live_update.txt" 2>&1
    urc=$?
    run rankctl score --target "127.0.0.1:$srv_port" --input "$work/live_req.jsonl" \
      --output "$work/live_got.jsonl" > "$out/live_rankctl_score.txt" 2>&1
    res=$(python3 - "$work/live_want.jsonl" "$work/live_got.jsonl" <<'PYEOF'
import json, sys
w = [json.loads(l)["scores"] for l in open(sys.argv[1])]
g = [json.loads(l)["scores"] for l in open(sys.argv[2])]
if len(w) != len(g) or not w:
    print(f"FAIL responses {len(g)} of {len(w)}"); sys.exit()
err = max(abs(a - b) for x, y in zip(w, g) for a, b in zip(x, y))
print(("PASS" if err <= 1e-5 else "FAIL") + f" max |err| {err:.2e} over {sum(map(len, w))} scores")
PYEOF
)
    row "live cuda exactness (HBM + HOST/cache)" "update rc $urc; $res"
    kill -TERM $srv_pid; wait $srv_pid
  else
    row "live cuda exactness" "FAIL: not serving: $(tail -2 "$out/live.log" | tr '\n' ' ')"
  fi
  # Dynamic tables on the GPU: two DYNAMIC tables with room for 100 more
  # keys, one in HBM, one in pinned host memory behind the cache (with a
  # STATIC HOST table); a delta of updated, new and deleted keys; served
  # scores vs the CPU on the delta applied by the test, then a snapshot
  # written from the GPU vs the CPU scoring that snapshot.
  dm="$work/lived/d/1"
  rm -rf "$work/lived" "$work/lived_exp"
  run rankd gen-model --preset kaggle --scale 0.01 --name d --seed 6 --dynamic_tables 2 --out "$dm" > /dev/null 2>&1
  dyns=$(grep -B2 'kind: DYNAMIC' "$dm/model.pbtxt" | sed -n 's/.*name: "\(.*\)"/\1/p')
  for t in $dyns; do python3 $util grow "$dm" "$t" 100; done
  python3 - "$dm/model.pbtxt" <<'PYEOF'
import re, sys
p = sys.argv[1]
blocks = re.split(r"(?m)^tables \{", open(p).read())
dyn = [i for i in range(1, len(blocks)) if "kind: DYNAMIC" in blocks[i]]
stat = sorted((i for i in range(1, len(blocks)) if "kind: DYNAMIC" not in blocks[i]),
              key=lambda i: -int(re.search(r"num_rows: (\d+)", blocks[i]).group(1)))
for i in [dyn[-1], stat[1]]:  # the last DYNAMIC and the 2nd largest STATIC: HOST
    blocks[i] = blocks[i].replace("\n  dim:", "\n  placement: HOST\n  dim:", 1)
for i in [dyn[0]]:  # the first DYNAMIC: HBM
    blocks[i] = blocks[i].replace("\n  dim:", "\n  placement: DEVICE\n  dim:", 1)
open(p, "w").write("tables {".join(blocks))
PYEOF
  python3 $util make-delta "$dm" "$work/lived_delta.safetensors" "$work/lived_side.json" 8 1
  python3 $util apply-delta "$dm" "$work/lived_delta.safetensors" "$work/lived_exp" 2> "$out/lived_apply.err"
  run rankd gen-requests --model "$dm" --count 30 --candidates 16 --seed 7 --output "$work/lived_req0.jsonl"
  python3 $util touch-requests "$work/lived_req0.jsonl" "$work/lived_side.json" "$work/lived_req.jsonl"
  run rankd score --model "$work/lived_exp" --input "$work/lived_req.jsonl" --output "$work/lived_want.jsonl" 2> "$out/lived_score.err"
  maxerr() {  # want got -> PASS/FAIL line (fp32 within 1e-5)
    python3 - "$1" "$2" <<'PYEOF'
import json, sys
w = [json.loads(l)["scores"] for l in open(sys.argv[1])]
g = [json.loads(l)["scores"] for l in open(sys.argv[2])]
if len(w) != len(g) or not w:
    print(f"FAIL responses {len(g)} of {len(w)}"); sys.exit()
err = max(abs(a - b) for x, y in zip(w, g) for a, b in zip(x, y))
print(("PASS" if err <= 1e-5 else "FAIL") + f" max |err| {err:.2e} over {sum(map(len, w))} scores")
PYEOF
  }
  if serve_up lived "$work/lived" --device_memory_budget 64M --log_level info; then
    run rankctl update --admin_target "127.0.0.1:$srv_aport" --model d \
      --input "$work/lived_delta.safetensors" --producer_id gpu --rows_per_message 4 > "$out/lived_update.txt" 2>&1
    urc=$?
    run rankctl score --target "127.0.0.1:$srv_port" --input "$work/lived_req.jsonl" \
      --output "$work/lived_got.jsonl" > "$out/lived_rankctl_score.txt" 2>&1
    row "live cuda dynamic exactness (HBM + HOST/cache)" "update rc $urc; $(maxerr "$work/lived_want.jsonl" "$work/lived_got.jsonl")"
    run rankctl snapshot --admin_target "127.0.0.1:$srv_aport" --model d > "$out/lived_snapshot.txt" 2>&1
    src=$?
    run rankd score --model "$work/lived/d/2" --input "$work/lived_req.jsonl" --output "$work/lived_snap.jsonl" 2> "$out/lived_snap_score.err"
    row "live cuda snapshot vs CPU on it" "snapshot rc $src; $(maxerr "$work/lived_snap.jsonl" "$work/lived_got.jsonl")"
    grep -E 'DYNAMIC|inserted|evict|total' "$out/lived_update.txt" | head -5 > "$out/lived_update_summary.txt"
    kill -TERM $srv_pid; wait $srv_pid
  else
    row "live cuda dynamic exactness" "FAIL: not serving: $(tail -2 "$out/lived.log" | tr '\n' ' ')"
  fi
  if [ -x "$bundle/bin/dynamic_table_bench" ]; then
    run dynamic_table_bench > "$out/dynamic_table_bench.txt" 2>&1
    while IFS= read -r line; do row "dyn: ${line:0:42}" "${line:42}"; done < <(grep -E '/s|%' "$out/dynamic_table_bench.txt")
    # The same lookups and upserts with dim 128 rows (the issue's row size).
    run dynamic_table_bench --scatter=false --dim 128 > "$out/dynamic_table_bench_128.txt" 2>&1
    while IFS= read -r line; do row "dyn128: ${line:0:42}" "${line:42}"; done < <(grep -E '%|evicting' "$out/dynamic_table_bench_128.txt")
  fi
  rows=${LIVE_ROWS:-1000000}
  rm -rf "$work/livebig"
  run rankd gen-model --preset mlperf --scale 0.05 --init random --name m --out "$work/livebig/m/1" > /dev/null 2>&1
  python3 $util make-delta-static "$work/livebig/m/1" "$work/livebig_delta.safetensors" "$work/livebig_side.json" 7 "$rows" 1
  if serve_up livebig "$work/livebig" --log_level info; then
    run rankctl update --admin_target "127.0.0.1:$srv_aport" --model m \
      --input "$work/livebig_delta.safetensors" --producer_id bench > "$out/livebig_update.txt" 2>&1
    row "live e2e rankctl update (mlperf dim 128)" "$(grep -E '^total' "$out/livebig_update.txt")"
    kill -TERM $srv_pid; wait $srv_pid
  fi
  rm -rf "$work/livebig" "$work/livebig_delta.safetensors"
fi

# --- liveload: serving p99 under a concurrent update stream (issue 16) ------
# "p99 at 50% of measured capacity with and without a concurrent update stream of
# 1 M rows/s" (target: p99 up by <= 20%). An mlperf-shaped model (x LIVELOAD_SCALE,
# default 0.05, init random: dim 128 fp32 tables), LIVELOAD_CANDIDATES (64)
# candidates per request from `rankd gen-requests` (Zipf 1.05, LIVELOAD_REQUESTS
# distinct ones) replayed by rankload. Capacity: rankload closed loop at
# LIVELOAD_CONCURRENCY (64,256) in flight, LIVELOAD_CAPACITY_S (5) s each: the
# highest achieved req/s (LIVELOAD_CAPACITY_RPS=R skips the measurement). Then
# open loop at LIVELOAD_FRACTION (0.5) of it, LIVELOAD_DURATION_S (20) s measured
# after LIVELOAD_WARMUP_S (2): alone ("base"), then with `rankctl update
# --max_rows_per_second LIVELOAD_UPDATE_RPS (1000000) --repeat 0 --repeat_for_s ...`
# sending a LIVELOAD_DELTA_ROWS (262144) row delta of the largest table over and
# over (new sequence numbers each pass) from before the warm-up to after the window
# ("update"). LIVELOAD_ROUNDS (1) rounds of (alone, with the stream), then alone
# once more (drift check; LIVELOAD_BASE_AFTER=0 skips it); the verdict compares
# the medians of each kind's client p99 and server p99 (from its buckets). Also, first, the unpaced rate of LIVELOAD_UNPACED_PASSES (4) passes of that
# delta on the idle server. Rows/s in the window: rankd_embedding_updates_total
# sampled at the window's ends. LIVELOAD_RANKLOAD_FLAGS: more rankload flags for the
# open-loop runs (e.g. "--arrival poisson"); LIVELOAD_UPDATE_FLAGS: more rankctl update
# flags (e.g. "--rows_per_message 6000": fewer, larger messages, each of which
# pauses the version's batches once). LIVELOAD_CLIENT_CPUS (e.g. 12-15) runs
# rankload and rankctl under taskset (rankd keeps every core); LIVELOAD_UPDATE_CPUS
# puts rankctl (the producer: a training job elsewhere in production) on cores of
# its own. LIVELOAD_SERVE_FLAGS: more rankd serve flags (e.g.
# "--update_cpu_priority normal"). Raw outputs: $out/liveload_*.
if want liveload; then
  util=tests/e2e/live_embeddings_util.py
  ll="$work/liveload"
  rm -rf "$ll"
  mkdir -p "$ll"
  ll_client=()
  [ -n "${LIVELOAD_CLIENT_CPUS:-}" ] && ll_client=(taskset -c "$LIVELOAD_CLIENT_CPUS")
  ll_producer=("${ll_client[@]}")
  [ -n "${LIVELOAD_UPDATE_CPUS:-}" ] && ll_producer=(taskset -c "$LIVELOAD_UPDATE_CPUS")
  ll_warm=${LIVELOAD_WARMUP_S:-2} ll_dur=${LIVELOAD_DURATION_S:-20}
  ll_urate=${LIVELOAD_UPDATE_RPS:-1000000}
  run rankd gen-model --preset "${LIVELOAD_PRESET:-mlperf}" --scale "${LIVELOAD_SCALE:-0.05}" \
    --init random --name m --out "$ll/root/m/1" > "$out/liveload_gen.txt" 2>&1
  python3 $util make-delta-static "$ll/root/m/1" "$ll/delta.safetensors" "$ll/side.json" 9 \
    "${LIVELOAD_DELTA_ROWS:-262144}" 1
  run rankd gen-requests --model "$ll/root/m/1" --count "${LIVELOAD_REQUESTS:-200}" \
    --candidates "${LIVELOAD_CANDIDATES:-64}" --zipf 1.05 --seed 21 --output "$ll/req.jsonl" \
    >> "$out/liveload_gen.txt" 2>&1
  # shellcheck disable=SC2086  # LIVELOAD_SERVE_FLAGS: several flags, word-split on purpose
  if serve_up liveload "$ll/root" --log_level info ${LIVELOAD_SERVE_FLAGS:-}; then
    # One step of rankload (flags after the tag), its JSON and report under $out.
    ll_rankload() {  # tag [flags]
      local tag=$1; shift
      "${ll_client[@]}" "$bundle/run" rankload --target "127.0.0.1:$srv_port" --requests "$ll/req.jsonl" \
        --connections "${LIVELOAD_CONNECTIONS:-16}" --threads "${LIVELOAD_THREADS:-4}" --quiet \
        --metrics_url "http://127.0.0.1:$srv_mport/metrics" --json "$out/liveload_$tag.json" "$@" \
        > "$out/liveload_$tag.txt" 2>&1
    }
    ll_update() {  # tag [flags]: rankctl update of the delta, output in $out
      local tag=$1; shift
      "${ll_producer[@]}" "$bundle/run" rankctl update --admin_target "127.0.0.1:$srv_aport" --model m \
        --input "$ll/delta.safetensors" --producer_id liveload ${LIVELOAD_UPDATE_FLAGS:-} "$@" \
        > "$out/liveload_$tag.txt" 2>&1
    }
    # p50 / p99 (us), achieved req/s, errors, client behind, from a rankload JSON.
    ll_summary() {
      python3 - "$1" <<'PYEOF'
import json, sys
st = json.load(open(sys.argv[1]))["steps"][-1]
l = st["latency_us"]
sw = st.get("server_window") or {}
print("%.1f %.1f %.0f %d %s %.0f" % (l["p50"], l["p99"], st["achieved_rps"], st["errors"],
      "yes" if st["client_behind"] else "no", sw.get("p99_request_us") or 0))
PYEOF
    }
    # The unpaced end-to-end rate of the delta on the idle server.
    ll_update unpaced --repeat "${LIVELOAD_UNPACED_PASSES:-4}"
    urc=$?
    row "liveload update unpaced, idle (rc $urc)" "$(grep -m1 -E '^table ' "$out/liveload_unpaced.txt" | grep -oE '[0-9]+ rows, .*dim [0-9]+\)'); $(grep -E '^total' "$out/liveload_unpaced.txt")"
    cap=${LIVELOAD_CAPACITY_RPS:-}
    if [ -z "$cap" ]; then
      ll_rankload capacity --mode closed --concurrency "${LIVELOAD_CONCURRENCY:-64,256}" \
        --duration_s "${LIVELOAD_CAPACITY_S:-5}" --warmup_s 1 --csv "$out/liveload_capacity.csv"
      cap=$(python3 -c '
import json, sys
print("%.0f" % max(s["achieved_rps"] for s in json.load(open(sys.argv[1]))["steps"]))' "$out/liveload_capacity.json" 2>/dev/null)
      row "liveload capacity (closed loop)" "$(python3 -c '
import json, sys
print("; ".join("%s in flight: %.0f req/s p99 %.0f us" % (s.get("concurrency"), s["achieved_rps"], s["latency_us"]["p99"])
                for s in json.load(open(sys.argv[1]))["steps"]))' "$out/liveload_capacity.json" 2>&1 | head -c 300)"
    fi
    rate=$(python3 -c "print('%.0f' % (float('${cap:-0}') * ${LIVELOAD_FRACTION:-0.5}))")
    if [ -z "$cap" ] || [ "$rate" = 0 ]; then
      row "liveload" "FAIL: no capacity measured: $(tail -2 "$out/liveload_capacity.txt" | tr '\n' ' ')"
    else
      # shellcheck disable=SC2206
      ll_open=(--mode open --rate "$rate" --duration_s "$ll_dur" --warmup_s "$ll_warm" ${LIVELOAD_RANKLOAD_FLAGS:-})
      # One run with the update stream (tag): the stream starts (delta read and
      # split: the `stream:` line) before the load and runs past the window's
      # end; rows applied in the window from the counter sampled at its ends.
      # Prints the run's summary, then the stream's rc and window rows/s.
      ll_with_updates() {  # tag
        local tag=$1 upid spid urc window_rps
        ll_update "${tag}_stream" --max_rows_per_second "$ll_urate" --repeat 0 \
          --repeat_for_s $((ll_warm + ll_dur + 2)) &
        upid=$!
        for _ in $(seq 600); do
          grep -q '^stream:' "$out/liveload_${tag}_stream.txt" 2>/dev/null && break
          kill -0 $upid 2>/dev/null || break
          sleep 0.1
        done
        ( sleep "$ll_warm"; echo "$(date +%s.%N) $(metric_sum rankd_embedding_updates_total)" > "$ll/rows0"
          sleep "$ll_dur"; echo "$(date +%s.%N) $(metric_sum rankd_embedding_updates_total)" > "$ll/rows1" ) &
        spid=$!
        ll_rankload "$tag" "${ll_open[@]}"
        wait $spid
        wait $upid
        urc=$?
        window_rps=$(python3 -c '
import sys
(t0, r0), (t1, r1) = (map(float, open(f).read().split()) for f in sys.argv[1:])
print("%.0f" % ((r1 - r0) / (t1 - t0)))' "$ll/rows0" "$ll/rows1" 2>/dev/null)
        echo "$(ll_summary "$out/liveload_$tag.json") $urc ${window_rps:-0}"
      }
      # LIVELOAD_ROUNDS (1) rounds of (alone, with the stream), then alone once
      # more (LIVELOAD_BASE_AFTER=0 skips it): runs alternate, so drift and the
      # host's noise fall on both kinds alike; medians over the runs of a kind.
      ll_rounds=${LIVELOAD_ROUNDS:-1}
      row "liveload rate (${LIVELOAD_FRACTION:-0.5} x $cap req/s)" "$rate req/s open loop, ${LIVELOAD_CANDIDATES:-64} candidates, ${ll_dur} s, $ll_rounds round(s)"
      : > "$ll/runs"
      for ((k = 1; k <= ll_rounds; k++)); do
        ll_rankload "base$k" "${ll_open[@]}"
        echo "base base$k $(ll_summary "$out/liveload_base$k.json")" >> "$ll/runs"
        echo "update update$k $(ll_with_updates "update$k")" >> "$ll/runs"
      done
      if [ "${LIVELOAD_BASE_AFTER:-1}" = 1 ]; then
        ll_rankload "base$k" "${ll_open[@]}"
        echo "base base$k $(ll_summary "$out/liveload_base$k.json")" >> "$ll/runs"
      fi
      cp "$ll/runs" "$out/liveload_runs.txt"
      while read -r kind tag p50 p99 rps err behind s99 urc wrps; do
        extra=""
        [ "$kind" = update ] && extra="; stream rc $urc, ${wrps} rows/s in the window (asked $ll_urate)"
        row "liveload $tag" "p50 $p50 us p99 $p99 us; achieved $rps req/s; errors $err; client behind $behind; server p99 ~$s99 us$extra"
      done < "$ll/runs"
      row "liveload p99 with updates vs without (target <= +20%)" "$(python3 - "$ll/runs" <<'PYEOF'
import statistics, sys
runs = [l.split() for l in open(sys.argv[1]) if l.strip()]
def med(kind, col):
    v = [float(r[col]) for r in runs if r[0] == kind and float(r[col]) > 0]
    return statistics.median(v) if v else 0.0
out = []
for name, col in (("client p99", 3), ("server p99", 7)):
    b, w = med("base", col), med("update", col)
    out.append("%s median %.0f -> %.0f us (%s)" % (name, b, w, "%+.1f%%" % (100 * (w - b) / b) if b > 0 else "n/a"))
print("; ".join(out))
PYEOF
)"
    fi
    curl -s "127.0.0.1:$srv_mport/metrics" | grep -E '^rankd_(embedding_update|request_duration_seconds_count|requests_total)' > "$out/liveload_metrics.txt"
    kill -TERM $srv_pid; wait $srv_pid
  else
    row "liveload" "FAIL: not serving: $(tail -2 "$out/liveload.log" | tr '\n' ' ')"
    kill $srv_pid 2>/dev/null; wait $srv_pid 2>/dev/null
  fi
  rm -rf "$ll"
fi

if want reference; then
  bash tests/gpu/reference_check.sh "$bundle" "$work/ref" "$out" > "$out/reference.log" 2>&1
  row "reference (CPU engine vs PyTorch fp64)" "$(grep -c ' PASS ' "$out/reference.log") pass, $(grep -c ' FAIL ' "$out/reference.log") fail"
fi

echo
echo "================ rankd GPU suite: $(head -1 "$out/gpu.txt") ================"
cat "$table"
