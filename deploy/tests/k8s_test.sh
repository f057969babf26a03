#!/bin/bash
# Renders deploy/k8s/base and every deploy/k8s/overlays/*/ with
# `kubectl kustomize` (offline; kubectl >= 1.14, whose built-in kustomize
# understands the v2.0.3-era fields these kustomizations use), then checks
# the rendered objects with k8s_check.py: native gRPC probes, grace period
# above preStop + --drain_timeout, GPU limits in the GPU overlay, non-root
# containers matching the image's user, existing rankd flags, Services,
# ServiceMonitor, HPA, PDB, PrometheusRule = alerts.yml. The checker's
# self-test then mutates the rendered GPU/CPU overlays and requires each
# mutation to be caught.
set -euo pipefail
# Under `bazel test` this script runs as deploy/<name>; by hand from deploy/tests/.
if [[ -n "${TEST_SRCDIR:-}" ]]; then
  source "$TEST_SRCDIR/$TEST_WORKSPACE/deploy/tests/common.sh"
else
  source "$(dirname "$0")/common.sh"
fi

KUBECTL="${KUBECTL:-kubectl}"
command -v "$KUBECTL" >/dev/null ||
  die "no kubectl (scripts/setup.sh installs Debian's kubernetes-client when none is present)"
"$KUBECTL" version --client 2>/dev/null | head -n 2 >&2 || true

# kustomize refuses files reached through symlinks that leave the
# kustomization's root (the runfiles tree is symlinks): work on a copy.
rm -rf "$TMP/k8s" "$TMP/rendered"
cp -rL "$DEPLOY/k8s" "$TMP/k8s"
mkdir -p "$TMP/rendered"

render() {  # render DIR NAME
  if ! "$KUBECTL" kustomize "$1" >"$TMP/rendered/$2.yaml" 2>"$TMP/$2.err"; then
    cat "$TMP/$2.err" >&2
    die "kubectl kustomize $1 failed"
  fi
  [[ -s "$TMP/rendered/$2.yaml" ]] || die "kubectl kustomize $1 rendered nothing"
  # Deprecation warnings of newer kustomize (bases, patchesStrategicMerge)
  # are expected; anything else is not.
  if grep -v -E "^# Warning: '(bases|patchesStrategicMerge|patchesJson6902)' is deprecated" "$TMP/$2.err" | grep -q .; then
    cat "$TMP/$2.err" >&2
    die "kubectl kustomize $1 printed unexpected messages"
  fi
  echo "rendered $1: $(grep -c '^kind:' "$TMP/rendered/$2.yaml") objects" >&2
}

render "$TMP/k8s/base" base
n=0
for k in "$TMP"/k8s/overlays/*/kustomization.yaml; do
  d="$(dirname "$k")"
  render "$d" "$(basename "$d")"
  n=$((n + 1))
done
[[ "$n" -ge 2 ]] || die "found $n overlays under deploy/k8s/overlays, want at least cpu and gpu"

"$RANKD" serve --help >"$TMP/serve-help.txt" 2>&1 || true
"$RANKD" gen-model --help >"$TMP/gen-model-help.txt" 2>&1 || true
grep -q -- '--drain_timeout' "$TMP/serve-help.txt" || die "rankd serve --help lists no --drain_timeout: $(head -5 "$TMP/serve-help.txt")"

"$PY" "$DEPLOY/tests/k8s_check.py" --rendered "$TMP/rendered" --deploy "$DEPLOY" \
  --serve_help "$TMP/serve-help.txt" --gen_model_help "$TMP/gen-model-help.txt" --self_test
