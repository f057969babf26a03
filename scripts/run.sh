#!/usr/bin/env bash
# The main job: installs what is missing, builds rankd, makes the demo models
# (mini, and kaggle at 1% scale) and starts `rankd serve` on them in the
# foreground (gRPC :8500, metrics :8502; Ctrl-C drains and stops it).
# Backend: auto (the GPU when this build has the CUDA backend and a GPU is
# present, else the CPU). Extra arguments go to `rankd serve`.
#   MODEL_ROOT=dir   serve another model root (default: demo/models)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
bazel build //server:rankd //client:rankctl
bin=$(bazel info bazel-bin 2>/dev/null)
model_root=${MODEL_ROOT:-demo/models}
if [ -z "${MODEL_ROOT:-}" ]; then
  [ -f demo/models/mini/1/model.pbtxt ] ||
    "$bin/server/rankd" gen-model --preset mini --out demo/models/mini/1
  [ -f demo/models/kaggle/1/model.pbtxt ] ||
    "$bin/server/rankd" gen-model --preset kaggle --scale 0.01 --out demo/models/kaggle/1
  [ -f demo/requests/mini.jsonl ] || {
    mkdir -p demo/requests
    "$bin/server/rankd" gen-requests --model demo/models/mini/1 --count 4 --candidates 8 \
      --output demo/requests/mini.jsonl
  }
fi
# Short names for the README's examples.
mkdir -p demo/bin
ln -sf "$bin/server/rankd" demo/bin/rankd
ln -sf "$bin/client/rankctl" demo/bin/rankctl
echo "rankd: serving $model_root; try: demo/bin/rankctl score --input demo/requests/mini.jsonl"
exec "$bin/server/rankd" serve --model_root "$model_root" --backend auto "$@"
