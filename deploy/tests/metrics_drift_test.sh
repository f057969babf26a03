#!/bin/bash
# Dashboards and alerts cannot drift from the server: starts the real
# `rankd serve` (//server:rankd) on a mini model with one dynamic table (so
# per-table series of both kinds exist), sends Score requests through
# rankctl (so the per-code request series exist), scrapes /metrics, and
# requires every metric name (and every label matched in a selector or
# grouped by in `by (...)`) used by the Grafana dashboards, the alert rules,
# the PrometheusRule and the prometheus-adapter rules to be exported
# (promql_names.py). Every one of
# those expressions must also parse: they go through `promtool check rules`
# as recording rules.
set -uo pipefail
# Under `bazel test` this script runs as deploy/metrics_drift_test; by hand
# (after building rankd and rankctl into bazel-bin) from deploy/tests/.
if [[ -n "${TEST_SRCDIR:-}" ]]; then
  source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/e2e/lib.sh" || exit 1
else
  source "$(dirname "$0")/../../tests/e2e/lib.sh" || exit 1
fi

DEPLOY="$E2E_ROOT/deploy"
PROMTOOL=/usr/bin/promtool
[[ -x "$PROMTOOL" ]] || die "$PROMTOOL missing (scripts/setup.sh installs Debian's prometheus)"

"$PY" "$DEPLOY/tests/promql_names.py" --self_test || fail "promql_names.py self-test"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini --dynamic_tables 1
gen_requests "$MODELS/mini/1" "$TMP/req.jsonl" --count 5 --candidates 8 --seed 7
start_rankd "$MODELS" --backend cpu
rankctl score --input "$TMP/req.jsonl" --output "$TMP/got.jsonl" 2>"$TMP/rankctl.err" ||
  fail "rankctl score: $(tail -3 "$TMP/rankctl.err")"
expect_grep "rankctl summary" "$TMP/rankctl.err" "^rankctl score: 5 ok, 0 failed"
scrape "$TMP/metrics.txt"
expect_grep "requests counted" "$TMP/metrics.txt" '^rankd_requests_total\{.*code="OK"'
expect_grep "dynamic-table series" "$TMP/metrics.txt" '^rankd_ids_missing_total\{'

"$PY" "$DEPLOY/tests/promql_names.py" --deploy "$DEPLOY" --metrics "$TMP/metrics.txt" \
  --rules_out "$TMP/exprs.rules.json" || fail "metric names used in deploy/ that rankd does not export (above)"
if [[ -s "$TMP/exprs.rules.json" ]]; then
  "$PROMTOOL" check rules "$TMP/exprs.rules.json" >"$TMP/promtool.out" 2>&1 ||
    fail "deploy/ PromQL that does not parse: $(cat "$TMP/promtool.out")"
else
  fail "promql_names.py wrote no expressions"
fi

stop_rankd
expect_eq "rankd exit status after SIGTERM" "$RANKD_RC" 0
finish
