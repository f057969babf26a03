#!/bin/bash
# The stubs shipped in client/python/rankd_client/_proto are exactly what
# client/python/gen_stubs.sh makes from protos/ now: regenerate them into a
# temp dir and diff. On failure: run client/python/gen_stubs.sh and commit.
set -euo pipefail

if [[ -n "${TEST_SRCDIR:-}" ]]; then
  ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"
else
  ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
fi
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
rm -rf "$TMP/fresh"
"$ROOT/client/python/gen_stubs.sh" "$TMP/fresh"
SHIPPED="$ROOT/client/python/rankd_client/_proto"
# Bytecode caches are not stubs.
if ! diff -r -x __pycache__ "$SHIPPED" "$TMP/fresh" >"$TMP/diff.txt"; then
  head -80 "$TMP/diff.txt" >&2
  echo "FAIL: client/python/rankd_client/_proto differs from what gen_stubs.sh makes of" \
    "protos/: run client/python/gen_stubs.sh and commit the result" >&2
  exit 1
fi
echo "PASS: $(find "$TMP/fresh" -name '*.py' | wc -l) stub files match"
