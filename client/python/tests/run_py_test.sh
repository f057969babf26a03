#!/bin/bash
# Runs one Python test of the rankd_client package (client/python/tests/NAME)
# with Debian's /usr/bin/python3 (the one with python3-grpcio; Bazel's py_test
# may pick another interpreter), against the package in the source tree and
# its shipped stubs: PYTHONPATH=client/python. Usage: run_py_test.sh NAME.py
set -euo pipefail

if [[ -n "${TEST_SRCDIR:-}" ]]; then
  ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"  # bazel test: the runfiles tree
else
  ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"  # by hand, from a checkout
fi
cd "$ROOT"
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$ROOT/client/python" \
  exec /usr/bin/python3 "client/python/tests/$1"
