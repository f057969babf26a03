#!/bin/bash
# Every YAML file under deploy/ passes yamllint (deploy/yamllint.yaml);
# Prometheus' config and alert rules pass `promtool check config` /
# `promtool check rules`, and the rules' unit tests (alerts_test.yml) pass
# `promtool test rules`; config_check.py then checks the compose stack's
# wiring (mounts, ports, targets, flags, grace period, GPU override), the
# dashboards and the alert coverage, and its self-test requires known-bad
# compose edits to be caught.
set -euo pipefail
# Under `bazel test` this script runs as deploy/<name>; by hand from deploy/tests/.
if [[ -n "${TEST_SRCDIR:-}" ]]; then
  source "$TEST_SRCDIR/$TEST_WORKSPACE/deploy/tests/common.sh"
else
  source "$(dirname "$0")/common.sh"
fi

YAMLLINT="$(command -v yamllint || true)"
[[ -n "$YAMLLINT" ]] || die "no yamllint (scripts/setup.sh installs Debian's yamllint)"
PROMTOOL=/usr/bin/promtool
[[ -x "$PROMTOOL" ]] || die "$PROMTOOL missing (scripts/setup.sh installs Debian's prometheus)"

mapfile -t yamls < <(cd "$DEPLOY" && find -L . -type f \( -name '*.yml' -o -name '*.yaml' \) | sort)
echo "yamllint: ${#yamls[@]} files" >&2
[[ "${#yamls[@]}" -ge 20 ]] || die "found only ${#yamls[@]} YAML files under deploy/: ${yamls[*]}"
(cd "$DEPLOY" && "$YAMLLINT" --strict -c yamllint.yaml "${yamls[@]}") || die "yamllint found problems (above)"

"$PROMTOOL" check config "$DEPLOY/prometheus/prometheus.yml" || die "promtool check config prometheus.yml"
"$PROMTOOL" check rules "$DEPLOY/prometheus/alerts.yml" || die "promtool check rules alerts.yml"
(cd "$DEPLOY/prometheus" && "$PROMTOOL" test rules alerts_test.yml) || die "promtool test rules alerts_test.yml"

"$RANKD" serve --help >"$TMP/serve-help.txt" 2>&1 || true
"$RANKD" gen-model --help >"$TMP/gen-model-help.txt" 2>&1 || true
"$PY" "$DEPLOY/tests/config_check.py" --deploy "$DEPLOY" --serve_help "$TMP/serve-help.txt" \
  --gen_model_help "$TMP/gen-model-help.txt" --self_test
