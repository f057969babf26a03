#!/bin/bash
# Runs rankd_client_test.py with Debian's /usr/bin/python3 (the one with
# python3-grpcio; Bazel's py_test may pick another interpreter), after
# generating the stubs into the test's temp dir: they are never committed.
set -euo pipefail

if [[ -n "${TEST_SRCDIR:-}" ]]; then
  ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"  # bazel test: the runfiles tree
else
  ROOT="$(cd "$(dirname "$0")/../.." && pwd)"  # by hand, from a checkout
fi
STUBS="${TEST_TMPDIR:-$(mktemp -d)}/stubs"
"$ROOT/client/python/gen_stubs.sh" "$STUBS"
cd "$ROOT"
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$STUBS:$ROOT/client/python" exec /usr/bin/python3 client/python/rankd_client_test.py
