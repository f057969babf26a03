#!/usr/bin/env bash
# The CPU-only build (--config=cpu, docs/build.md) checked with the CUDA
# toolkit really absent: in a private mount namespace an empty tmpfs hides
# /usr/local/cuda (where tools/cuda.bzl and tools/system_libs.bzl look), and
# Bazel, started inside it on an output base of its own, builds rankd,
# rankctl and rankload and runs //engine/gpu:gpu_backend_test. Then, outside:
# the binaries hold no device code, and `rankd serve --backend cuda` fails at
# start naming the reason. The binaries are copied to OUT_DIR (for the image
# stage, scripts/build_image.sh --bin_dir).
#
# The output base is separate from the checkout's (its server, started in
# the namespace, sees no CUDA) and is fed by the disk cache of .bazelrc, so
# after a default build only the GPU backend's sources compile.
#
# Needs root (mount namespace). Prints "cpu-build: PASS" or
# "cpu-build: FAIL <why>" last; exit status 0 only on PASS.
# Usage: scripts/cpu_build_check.sh OUT_DIR [extra bazel args]
set -uo pipefail
cd "$(dirname "$0")/.."

fail() { echo "cpu-build: FAIL $*"; exit 1; }

[ $# -ge 1 ] || { echo "usage: $0 OUT_DIR [bazel args]" >&2; exit 2; }
out_dir="$1"
shift
mkdir -p "$out_dir" || fail "cannot create $out_dir"
out_dir="$(cd "$out_dir" && pwd)"
# One output base per checkout (as Bazel's own), fed by the shared disk cache.
checkout_id=$(pwd | md5sum | cut -c1-12)
output_base="${RANKD_CPU_OUTPUT_BASE:-$HOME/.cache/rankd/bazel-cpu-only/$checkout_id}"
targets=(//server:rankd //client:rankctl //loadtest:rankload)

unshare --mount --propagation private true 2>/dev/null ||
  fail "cannot make a private mount namespace to hide /usr/local/cuda (unshare --mount needs root)"

# Runs inside the namespace: hide the toolkit, build, test, copy out.
inside() {
  set -uo pipefail
  if [ -e /usr/local/cuda ]; then
    mount -t tmpfs -o size=1m,mode=0755 rankd-no-cuda /usr/local/cuda ||
      { echo "cannot mount a tmpfs over /usr/local/cuda"; return 1; }
  fi
  # (A wrapper named nvcc may stay on PATH; it must not find a compiler.)
  if [ -n "$(ls -A /usr/local/cuda 2>/dev/null)" ] || nvcc --version >/dev/null 2>&1; then
    echo "the CUDA toolkit is still usable (/usr/local/cuda not empty, or nvcc runs)"
    return 1
  fi
  local b=(bazel --output_base="$output_base")
  # No convenience symlinks: bazel-bin & co. stay those of the checkout's own
  # output base (they would point here, and `bazel query //...` would then
  # descend into this output base through bazel-<dir>).
  set -- --symlink_prefix=/ "$@"
  trap '"${b[@]}" shutdown >/dev/null 2>&1' RETURN
  # What the binaries depend on in this configuration: nothing of CUDA (a
  # cached nvcc action would not need the toolkit, so the graph is checked).
  local cuda_deps
  cuda_deps=$("${b[@]}" cquery --config=cpu "$@" "deps($(IFS=+; echo "${targets[*]}"))" 2>/dev/null |
    grep -E '^(//kernels/cuda|//engine/cuda|//third_party:cuda|@system_cuda)' | head -3 | tr '\n' ' ')
  if [ -n "$cuda_deps" ]; then
    echo "the --config=cpu binaries depend on CUDA targets: $cuda_deps"
    return 1
  fi
  "${b[@]}" build --config=cpu --jobs=2 "$@" "${targets[@]}" || { echo "bazel build failed"; return 1; }
  "${b[@]}" test --config=cpu --jobs=2 "$@" //engine/gpu:gpu_backend_test ||
    { echo "//engine/gpu:gpu_backend_test failed"; return 1; }
  local bin
  bin="$("${b[@]}" info --config=cpu bazel-bin 2>/dev/null)" || { echo "bazel info failed"; return 1; }
  cp -f "$bin/server/rankd" "$bin/client/rankctl" "$bin/loadtest/rankload" "$out_dir/" ||
    { echo "copying the binaries failed"; return 1; }
}
export -f inside
export output_base out_dir
targets_decl="$(declare -p targets)"
if ! why=$(unshare --mount --propagation private bash -c "$targets_decl; inside \"\$@\"" \
    inside "$@" 2>&1 | tee /dev/stderr | tail -1; exit "${PIPESTATUS[0]}"); then
  fail "with /usr/local/cuda hidden: $why"
fi

# No device code: nvcc's fatbin sections would be there otherwise.
for b in rankd rankctl rankload; do
  [ -x "$out_dir/$b" ] || fail "$out_dir/$b is missing"
  if readelf -S "$out_dir/$b" | grep -q '\.nv_fatbin'; then
    fail "$b holds CUDA device code (.nv_fatbin): the CPU build linked CUDA code"
  fi
done

# --backend cuda must stop at start and say why.
models="$(mktemp -d)"
trap 'rm -rf "$models"' EXIT
serve_log="$models/serve.log"
timeout 60 "$out_dir/rankd" serve --backend=cuda --model_root="$models" --grpc_port=0 \
  --http_port=-1 --metrics_port=-1 --admin_port=-1 --health_port=-1 >"$serve_log" 2>&1
rc=$?
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
  fail "rankd serve --backend=cuda did not fail at start (exit $rc)"
fi
grep -q "this rankd build has no CUDA backend" "$serve_log" ||
  fail "rankd serve --backend=cuda failed without naming the missing CUDA backend: $(tail -3 "$serve_log")"

echo "cpu-build: binaries in $out_dir ($(du -ch "$out_dir"/rank* | tail -1 | cut -f1))"
echo "cpu-build: PASS"
