#!/bin/bash
# The Docker image, checked without a Docker engine:
#  1. dockerfile_check.py: stages, the builder running scripts/setup.sh and
#     scripts/run.sh's exact Bazel command, non-root USER, HEALTHCHECK via
#     `rankctl health` on the served port, flags rankd really has, OCI labels,
#     cuBLASLt where rankd dlopens it, .dockerignore; then its self-test
#     (known-bad edits must be caught).
#  2. runtime_packages.sh (what the builder runs to choose the runtime
#     packages) on the real rankd and rankctl: every shared library resolves
#     to a Debian package, the gRPC / protobuf / abseil / Prometheus ones are
#     among them, and a library no package owns makes it fail.
set -euo pipefail
# Under `bazel test` this script runs as deploy/<name>; by hand from deploy/tests/.
if [[ -n "${TEST_SRCDIR:-}" ]]; then
  source "$TEST_SRCDIR/$TEST_WORKSPACE/deploy/tests/common.sh"
else
  source "$(dirname "$0")/common.sh"
fi

"$RANKD" serve --help >"$TMP/serve-help.txt" 2>&1 || true
"$RANKCTL" health --help >"$TMP/health-help.txt" 2>&1 || true
grep -q -- '--target' "$TMP/health-help.txt" || die "rankctl health --help lists no --target"

"$PY" "$DEPLOY/tests/dockerfile_check.py" --root "$ROOT" --rankd "$RANKD" \
  --serve_help "$TMP/serve-help.txt" --health_help "$TMP/health-help.txt" --self_test

PKGS="$TMP/runtime-packages.txt"
bash "$DEPLOY/docker/runtime_packages.sh" "$RANKD" "$RANKCTL" >"$PKGS" ||
  die "runtime_packages.sh failed on rankd and rankctl"
echo "runtime packages: $(tr '\n' ' ' <"$PKGS")" >&2
for want in 'libgrpc\+\+' '^libprotobuf[0-9]' '^libabsl' '^libprometheus-cpp-pull' '^libspdlog' '^libc6$'; do
  grep -Eq -- "$want" "$PKGS" || die "runtime packages lack /$want/: $(tr '\n' ' ' <"$PKGS")"
done
if grep -Eq -- '-dev$' "$PKGS"; then
  die "runtime packages include -dev packages: $(grep -E -- '-dev$' "$PKGS" | tr '\n' ' ')"
fi

# A library outside any package (here: a copy of one in a private directory
# found first through LD_LIBRARY_PATH) must fail the derivation.
lib="$(ldd "$RANKD" | awk '$1 ~ /^libfmt/ { print $3 }')"
[[ -n "$lib" ]] || die "rankd links no libfmt (ldd: $(ldd "$RANKD" | head -3))"
mkdir -p "$TMP/privlib"
cp "$lib" "$TMP/privlib/"
if LD_LIBRARY_PATH="$TMP/privlib" bash "$DEPLOY/docker/runtime_packages.sh" "$RANKD" >/dev/null 2>"$TMP/neg.err"; then
  die "runtime_packages.sh accepted a library no package owns ($TMP/privlib/$(basename "$lib"))"
fi
grep -q "not owned by any Debian package" "$TMP/neg.err" || die "unexpected message: $(cat "$TMP/neg.err")"
echo "PASS"
