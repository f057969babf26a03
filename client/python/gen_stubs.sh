#!/bin/bash
# Generates the Python stubs of rankd's API into OUT_DIR (never committed):
#   OUT_DIR/rankd/v1/ranking_pb2{,_grpc}.py
#   OUT_DIR/rankd/v1/model_control_pb2{,_grpc}.py   (admin API: AdminClient)
#   OUT_DIR/grpc/health/v1/health_pb2{,_grpc}.py
# with Debian's python3-grpc-tools. Usage: client/python/gen_stubs.sh OUT_DIR
# Then: PYTHONPATH=OUT_DIR:client/python /usr/bin/python3 ...
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
OUT="$1"
# The repository root (protos/ lives there), wherever this is run from.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"  # absolute: protoc runs from $ROOT
cd "$ROOT"
PROTOS=(protos/rankd/v1/ranking.proto protos/grpc/health/v1/health.proto)
# A checkout always has it; a Bazel runfiles tree only when the test lists it
# in its data. Without it RankingClient works and AdminClient says what is
# missing.
if [[ -f protos/rankd/v1/model_control.proto ]]; then
  PROTOS+=(protos/rankd/v1/model_control.proto)
else
  echo "gen_stubs.sh: no protos/rankd/v1/model_control.proto here: AdminClient stubs not generated" >&2
fi
/usr/bin/python3 -m grpc_tools.protoc -Iprotos --python_out="$OUT" --grpc_python_out="$OUT" \
  "${PROTOS[@]}"
