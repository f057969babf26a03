#!/usr/bin/env bash
# On the GPU machine: the portable build (scripts/gpu_suite.sh with
# BAZEL_CONFIG=portable, or the smaller bundle of .gpu/portable.tar.xz) runs
# there: the GPU's name and compute capability, the kernel tests and
# `rankd serve --backend cuda` end to end (serve_check.sh).
# Usage: bash tests/gpu/portable_check.sh [BUNDLE_TAR_XZ]
set -uo pipefail
tar=${1:-.gpu/portable.tar.xz}
dir=$(mktemp -d)
xz -dc "$tar" | tar -C "$dir" -xf - || { echo "FAIL cannot unpack $tar"; exit 1; }
b="$dir/bundle"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
fail=0
for t in device_info_test tiny_dlrm_gpu_test embedding_lookup_gpu_test dynamic_table_gpu_test; do
  [ -x "$b/bin/$t" ] || continue
  timeout 600 "$b/run" "$t" --gtest_brief=1 >"$dir/$t.log" 2>&1
  rc=$?
  [ "$rc" = 0 ] || fail=1
  echo "$t: rc=$rc, $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$dir/$t.log" | tr '\n' ' ')"
done
bash tests/gpu/serve_check.sh "$b" "$dir/serve" >"$dir/serve.log" 2>&1 || fail=1
echo "serve_check: $(grep -c ^PASS "$dir/serve.log") passed, $(grep -c ^FAIL "$dir/serve.log") failed"
grep ^FAIL "$dir/serve.log"
grep -h "^rankd_build_info" "$dir/serve/metrics.txt" 2>/dev/null
exit $fail
