#!/usr/bin/env bash
# The test suite: installs what is missing, builds everything and runs every
# Bazel test (unit, integration, end-to-end). Ends with the line
# "N passed, N failed" counted from Bazel's per-test results.
# Usage: scripts/test.sh [extra bazel test args]
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

jobs_flag=()
# CI machines have 2 cores; Bazel's default parallelism is fine, but keep the
# memory of concurrent compiles in check.
[ -n "${CI:-}" ] && jobs_flag=(--local_ram_resources=HOST_RAM*.6)

log=$(mktemp)
bazel test //... --test_summary=short --test_output=errors "${jobs_flag[@]}" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

# One summary line per test target: "//pkg:target  (cached) PASSED in 0.3s".
passed=$(grep -cE '^//[^ ]+ +(\(cached\) +)?PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ +(\(cached\) +)?(FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE|FAILED TO BUILD)' "$log")
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
  failed=1  # the build itself failed before any test ran
fi
rm -f "$log"
echo "${passed} passed, ${failed} failed"
[ "$rc" -eq 0 ] && [ "$failed" -eq 0 ]
