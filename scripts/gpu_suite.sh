#!/usr/bin/env bash
# Builds everything the GPU machine runs and bundles it into
# .gpu/bundle.tar.xz (git-ignored): rankd, rankctl, every GPU test (targets tagged "gpu") and the
# GPU benchmarks. Then, on the GPU machine, from the repository root:
#     bash tests/gpu/run_on_device.sh
# (with the device tool: command "bash tests/gpu/run_on_device.sh", carry [".gpu"];
# SECTIONS="..." selects parts, see that script).
# BAZEL_CONFIG=portable builds the device code for every supported GPU
# generation (tools/cuda.bzl; nvcc takes several times longer); BENCHES=0
# leaves the benchmarks out.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
gpu_tests=$(bazel query 'attr(tags, "\bgpu\b", tests(//...))' 2>/dev/null)
benches=""
if [ "${BENCHES:-1}" != 0 ]; then
  benches=$(bazel query 'attr(tags, "manual", kind(cc_binary, //bench/...))' 2>/dev/null)
fi
targets=(//server:rankd //client:rankctl //loadtest:rankload $gpu_tests $benches)
[ "${BENCHES:-1}" != 0 ] && targets+=(//bench:serve_bench //bench:pack_bench)
echo "building: ${targets[*]}"
config=()
[ -n "${BAZEL_CONFIG:-}" ] && config=(--config="$BAZEL_CONFIG")
bazel build "${config[@]}" "${targets[@]}"
bin=$(bazel info "${config[@]}" bazel-bin 2>/dev/null)
paths=()
for t in "${targets[@]}"; do
  pkg=${t#//}; pkg=${pkg%%:*}; name=${t##*:}
  paths+=("$bin/$pkg/$name")
done
rm -rf .gpu
mkdir -p .gpu
bash scripts/gpu_bundle.sh .gpu-build/bundle "${paths[@]}"
# What is carried to the GPU machine is limited to 64 MiB: the ~100 MiB of
# binaries travel xz-compressed (~16 MiB); run_on_device.sh unpacks them.
tar -C .gpu-build -cf - bundle | xz -T0 -6 > .gpu/bundle.tar.xz
rm -rf .gpu-build
echo "bundle ready (.gpu/bundle.tar.xz, $(du -h .gpu/bundle.tar.xz | cut -f1)): run 'bash tests/gpu/run_on_device.sh' on the GPU machine with .gpu carried"
