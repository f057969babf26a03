#!/usr/bin/env bash
# End-to-end check of `rankd serve --backend cuda` on the GPU machine (no
# Bazel, no Debian gRPC Python there: rankctl and the bundle's binaries only).
# Usage: serve_check.sh BUNDLE WORKDIR   (prints PASS/FAIL lines; exit 1 on failure)
set -uo pipefail
bundle=$1
work=$2
run() { "$bundle/run" "$@"; }
fail=0
check() { if [ "$1" = 0 ]; then echo "PASS $2"; else echo "FAIL $2"; fail=1; fi; }

mkdir -p "$work/models"
run rankd gen-model --preset mini --out "$work/models/mini/1" 2>/dev/null
run rankd gen-model --preset kaggle --scale 0.01 --out "$work/models/kaggle/1" 2>/dev/null
run rankd gen-model --preset mini --num_tables 8 --dynamic_tables 2 --dtype bf16 --name minidyn \
  --out "$work/models/minidyn/1" 2>/dev/null
# A model whose queue holds 2 requests (for the overload check), 256-candidate requests.
run rankd gen-model --preset kaggle --scale 0.01 --name minitiny --out "$work/models/minitiny/1" 2>/dev/null
printf 'batching {\n  max_queue_requests: 2\n}\n' >> "$work/models/minitiny/1/model.pbtxt"
run rankd gen-requests --model "$work/models/minitiny/1" --count 50 --candidates 256 --seed 4 \
  --output "$work/minitiny.req.jsonl"
for m in mini kaggle minidyn; do
  run rankd gen-requests --model "$work/models/$m/1" --count 50 --candidates 64 --seed 3 \
    --output "$work/$m.req.jsonl"
  run rankd score --model "$work/models/$m/1" --input "$work/$m.req.jsonl" \
    --output "$work/$m.cpu.jsonl" 2>/dev/null
done
# Not through run(): a backgrounded shell function is a subshell, and SIGTERM must reach rankd.
"$bundle/run" rankd serve --model_root "$work/models" --backend cuda --host 127.0.0.1 --grpc_port 0 \
  --metrics_port 0 --admin_port 0 --http_port 0 --port_file "$work/ports" > "$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 300); do [ -s "$work/ports" ] && break; sleep 0.2; done
port=$(sed -n 's/grpc_port=//p' "$work/ports")
mport=$(sed -n 's/metrics_port=//p' "$work/ports")
grep -q "backend cuda" "$work/serve.log"; check $? "server started on the cuda backend"
for m in mini kaggle minidyn; do
  run rankctl score --target "127.0.0.1:$port" --input "$work/$m.req.jsonl" --concurrency 8 \
    --output "$work/$m.gpu.jsonl" 2> "$work/$m.rankctl.err"
  python3 tests/gpu/compare_scores.py "$work/$m.cpu.jsonl" "$work/$m.gpu.jsonl" 1e-5 50
  check $? "$m: served scores (cuda, fp32) match rankd score (CPU) within 1e-5"
done
run rankctl health --target "127.0.0.1:$port" --service kaggle > /dev/null; check $? "health SERVING"
echo '{"model":"mini","numCandidates":1,"dense":[1,2,3,4,5,6,7,8,9,10,11,12,"NaN"],"sparse":[{"name":"cat_0","ids":["1"],"lengths":[1]},{"name":"cat_1","ids":["1"],"lengths":[1]},{"name":"cat_2","ids":["1"],"lengths":[1]}]}' > "$work/bad.jsonl"
run rankctl score --target "127.0.0.1:$port" --input "$work/bad.jsonl" > /dev/null 2> "$work/bad.err"
grep -q "INVALID_ARGUMENT.*dense\[12\]" "$work/bad.err"; check $? "NaN dense value -> INVALID_ARGUMENT naming dense[12]"
curl -s "127.0.0.1:$mport/metrics" > "$work/metrics.txt"
grep -q 'rankd_requests_total{code="OK",model="kaggle",protocol="rankd",version="1"} 50' "$work/metrics.txt"; check $? "metrics count the 50 kaggle requests"
grep -q 'rankd_build_info{backend="cuda"' "$work/metrics.txt"; check $? "metrics report the cuda backend"
# Deadlines and overload through rankload (the gRPC client the GPU machine has).
errors_by() {  # json code -> count of that gRPC code in the step
  python3 -c 'import json,sys; st=json.load(open(sys.argv[1]))["steps"][-1]; print(st["total_by_code"].get(sys.argv[2], 0))' "$1" "$2"
}
run rankload --target "127.0.0.1:$port" --requests "$work/kaggle.req.jsonl" --mode closed \
  --concurrency 4 --duration_s 1 --warmup_s 0 --deadline_ms 0.01 --quiet \
  --json "$work/deadline.json" > "$work/deadline.txt" 2>&1
n=$(errors_by "$work/deadline.json" DEADLINE_EXCEEDED 2>/dev/null || echo 0)
[ "${n:-0}" -gt 0 ]; check $? "a 10 us deadline -> DEADLINE_EXCEEDED ($n calls)"
run rankload --target "127.0.0.1:$port" --requests "$work/minitiny.req.jsonl" --mode open \
  --rate 30000 --connections 8 --threads 4 --duration_s 1 --warmup_s 0 --quiet \
  --json "$work/overload.json" > "$work/overload.txt" 2>&1
n=$(errors_by "$work/overload.json" RESOURCE_EXHAUSTED 2>/dev/null || echo 0)
ok=$(errors_by "$work/overload.json" OK 2>/dev/null || echo 0)
[ "${n:-0}" -gt 0 ] && [ "${ok:-0}" -gt 0 ]
check $? "queue of 2 requests at 30k req/s -> RESOURCE_EXHAUSTED ($n) while others are served ($ok)"
# SIGTERM during load: every admitted request answered, exit 0.
run rankctl score --target "127.0.0.1:$port" --input "$work/kaggle.req.jsonl" --concurrency 16 \
  --output "$work/drain.jsonl" 2> "$work/drain.err" &
load=$!
sleep 0.05
kill -TERM $pid
wait $pid; rc=$?
wait $load
check $rc "SIGTERM during load: rankd exited 0"
bad=$(grep -vcE "UNAVAILABLE|CANCELLED|ok, .* failed" "$work/drain.err")
[ "$bad" = 0 ]; check $? "SIGTERM: no request failed other than UNAVAILABLE/CANCELLED before admission"
exit $fail
