# Shared preamble of the deploy/ tests (source it). Sets:
#   ROOT     the runfiles tree under `bazel test`, else the checkout
#   DEPLOY   $ROOT/deploy
#   RANKD, RANKCTL   the binaries (runfiles; by hand: $BIN_DIR, default bazel-bin)
#   TMP      a scratch directory;  PY  Debian's python3 (python3-yaml)
set -euo pipefail

if [[ -n "${TEST_SRCDIR:-}" ]]; then
  ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"
else
  ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
fi
DEPLOY="$ROOT/deploy"
BIN_DIR="${BIN_DIR:-$ROOT/bazel-bin}"
if [[ -x "$ROOT/server/rankd" ]]; then
  RANKD="$ROOT/server/rankd"
  RANKCTL="$ROOT/client/rankctl"
else
  RANKD="$BIN_DIR/server/rankd"
  RANKCTL="$BIN_DIR/client/rankctl"
fi
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
PY=/usr/bin/python3
export PYTHONDONTWRITEBYTECODE=1
# kubectl keeps caches under $HOME; tests have no writable home.
export HOME="$TMP/home"
mkdir -p "$HOME"

die() {
  echo "FATAL: $*" >&2
  exit 1
}
