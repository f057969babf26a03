#!/bin/bash
# The rankd_client package installs offline into a fresh venv and works from
# there: `python3 -m venv --system-site-packages` made with Debian's
# /usr/bin/python3 (grpcio, protobuf, numpy, setuptools, wheel from Debian),
# then `pip install --no-build-isolation --no-index` of a copy of client/python
# (pip builds in the source tree; the runfiles tree is not ours to write).
# The installed copy (not the source tree) must import, carry its stubs, and
# pass the retry tests.
set -euo pipefail

if [[ -n "${TEST_SRCDIR:-}" ]]; then
  ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"
else
  ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
fi
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
export PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH

rm -rf "$TMP/src" "$TMP/venv"
cp -RL "$ROOT/client/python" "$TMP/src"
rm -rf "$TMP/src/build" "$TMP/src"/*.egg-info
/usr/bin/python3 -m venv --system-site-packages "$TMP/venv"
PY="$TMP/venv/bin/python"
if ! "$PY" -m pip install --no-build-isolation --no-index --disable-pip-version-check \
    --no-cache-dir "$TMP/src" >"$TMP/pip.log" 2>&1; then
  cat "$TMP/pip.log" >&2
  echo "FAIL: pip install --no-build-isolation --no-index client/python" >&2
  exit 1
fi
grep -E "Successfully installed rankd-client-" "$TMP/pip.log"
rm -rf "$TMP/src"  # from here on only the installed copy exists

# From a neutral directory, so nothing but site-packages can supply it.
cd "$TMP"
"$PY" - "$TMP/venv" <<'PYEOF'
import os, sys
import numpy as np
import rankd_client
from rankd_client import aio, RankingClient, AdminClient, RetryPolicy
venv = os.path.realpath(sys.argv[1])
where = os.path.realpath(rankd_client.__file__)
assert where.startswith(venv + os.sep), "imported from %s, not the venv" % where
from rankd_client._proto.rankd.v1 import ranking_pb2, model_control_pb2_grpc
from rankd_client._proto.grpc.health.v1 import health_pb2_grpc
r = rankd_client.build_score_request("mini", np.ones((2, 3), np.float32),
                                     {"cat_0": (np.array([1, 2]), np.array([1, 1]))})
assert ranking_pb2.ScoreRequest.FromString(r.SerializeToString()) == r
print("installed:", where, "version", rankd_client.__version__)
PYEOF
"$PY" -m pip show rankd-client | grep -E "^(Name|Version|Requires):"
# The installed package passes the retry tests (sync and aio, fake server).
"$PY" "$ROOT/client/python/tests/retry_test.py" 2>&1 | tail -3
echo "PASS"
