#!/usr/bin/env bash
# Builds everything the GPU machine runs and bundles it into .gpu/bundle
# (git-ignored, carried by the device tool). Then, on the GPU machine, from
# the repository root:   bash tests/gpu/run_on_device.sh
# (the device tool: command "bash tests/gpu/run_on_device.sh", carry [".gpu"]).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
targets=(//server:rankd)
bazel build "${targets[@]}"
bin=$(bazel info bazel-bin 2>/dev/null)
rm -rf .gpu/bundle
bundle=../shared/tools/gpu-bundle
[ -x "$bundle" ] || bundle=shared/tools/gpu-bundle
"$bundle" .gpu/bundle "$bin/server/rankd"
echo "bundle ready: run 'bash tests/gpu/run_on_device.sh' on the GPU machine with .gpu carried"
