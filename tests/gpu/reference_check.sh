#!/usr/bin/env bash
# Reference check of the CPU engine against PyTorch (fp64) on the GPU machine:
# presets mini, kaggle, terabyte, mlperf (scaled) and variants (dynamic tables,
# fp16/bf16 rows): `rankd score` vs tests/reference/torch_reference.py.
# Usage: reference_check.sh BUNDLE WORKDIR OUTDIR   (run from the repo root)
set -uo pipefail
bundle=$1
work=$2
out=$3
mkdir -p "$work" "$out"
run() { "$bundle/run" "$@"; }
table="$out/reference_table.txt"
printf "%-34s %-6s %10s %12s %s\n" "case" "result" "requests" "max_rel_err" "note" > "$table"

ref_case() {  # name preset scale requests candidates [gen-model flags...]
  local name=$1 preset=$2 scale=$3 count=$4 cand=$5; shift 5
  local dir="$work/models/$name/1"
  {
    run rankd gen-model --preset "$preset" --scale "$scale" --name "$name" --out "$dir" "$@" &&
    run rankd gen-requests --model "$dir" --count "$count" --candidates "$cand" --zipf 1.05 \
      --output "$work/$name.req.jsonl" &&
    run rankd inspect --model "$dir" --json > "$work/$name.json" &&
    run rankd score --model "$dir" --input "$work/$name.req.jsonl" --output "$work/$name.resp.jsonl" &&
    python3 tests/reference/torch_reference.py --model "$dir" --config "$work/$name.json" \
      --requests "$work/$name.req.jsonl" --responses "$work/$name.resp.jsonl" --device cuda
  } > "$out/ref_$name.log" 2>&1
  local rc=$?
  local err
  err=$(grep -m1 -oE 'max rel err [0-9.eE+-]+' "$out/ref_$name.log" | awk '{print $4}')
  printf "%-34s %-6s %10s %12s %s\n" "$name" "$([ $rc -eq 0 ] && echo PASS || echo FAIL)" "$count" "${err:-?}" "$preset scale $scale $*" >> "$table"
}

ref_case mini mini 1 200 64
ref_case mini16_dyn_bf16 mini 1 100 64 --num_tables 16 --dynamic_tables 4 --dtype bf16
ref_case kaggle kaggle 0.01 100 64
ref_case kaggle_fp16_dyn kaggle 0.001 50 64 --dtype fp16 --dynamic_tables 3
ref_case terabyte terabyte 0.001 50 64
ref_case mlperf mlperf 0.001 30 64
ref_case mlperf_bf16 mlperf 0.0005 20 32 --dtype bf16

echo
echo "== reference check: rankd (CPU engine) vs PyTorch, fp64 reference =="
cat "$table"
