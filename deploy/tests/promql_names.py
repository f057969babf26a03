#!/usr/bin/python3
"""Metric names (and selector and grouping labels) that deploy/'s PromQL uses, against a /metrics scrape.

Sources of PromQL, all under DEPLOY_DIR:
  grafana/dashboards/*.json        every panel target's `expr` and the template
                                   variables' label_values(...) queries
  prometheus/*.yml (rule files)    every rule's `expr`
  k8s/base/prometheusrule.yaml     the same rules for prometheus-operator
  k8s/prometheus-adapter/values.yaml  seriesQuery and metricsQuery of each rule

Usage:
  promql_names.py --deploy DIR --metrics SCRAPE.txt [--rules_out FILE]
      every metric name used must be a sample name in SCRAPE.txt (histograms
      appear there as NAME_bucket / NAME_sum / NAME_count, which is what
      PromQL uses), or a series Prometheus makes itself (`up`); every label
      matched in a selector must exist on that metric's samples or be a
      label Prometheus attaches to targets (job, instance, pod, ...); every
      label of an aggregation's `by (...)` must exist on the samples of at
      least one metric it aggregates (or be a target label, or `le` over
      NAME_bucket): grouping by a label nothing has yields one unlabeled
      series instead of an error, so a renamed label would pass unseen.
      --rules_out writes every expression as a recording rule, with the
      Grafana / adapter template variables substituted, for `promtool check
      rules` (so the names come from expressions that really parse).
  promql_names.py --self_test
      the tokenizer on known expressions.

The parser is a small PromQL tokenizer, not a full grammar: identifiers are
metric names unless they are function calls, keywords, label names inside
{...} or in by/without/on/ignoring/group_left/group_right (...), or inside
[...] ranges. promtool (through --rules_out) checks the grammar.
"""

import argparse
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib  # noqa: E402

# Series Prometheus creates for each target.
SYNTHETIC = {"up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_series_added",
             "scrape_samples_post_metric_relabeling", "ALERTS", "ALERTS_FOR_STATE"}
# Labels Prometheus attaches at scrape time (compose: job, instance; the
# operator: also namespace, pod, service, container, endpoint).
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service", "container", "endpoint", "__name__"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
            "group_right", "atan2"}
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
                "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
  | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?:(?:ms|s|m|h|d|w|y)(?:\d+(?:ms|s|m|h|d|w|y))*)?)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=(){}\[\],:@])
""", re.VERBOSE)


def substitute_templates(expr, series=None):
    """Grafana and prometheus-adapter template variables -> valid PromQL."""
    expr = re.sub(r"\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}", "5m", expr)
    expr = expr.replace("<<.LabelMatchers>>", 'namespace!=""').replace("<<.GroupBy>>", "pod")
    if series:
        expr = expr.replace("<<.Series>>", series)
    return expr


def tokenize(expr):
    pos = 0
    out = []
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m:
            raise ValueError(f"cannot tokenize at {pos}: {expr[pos:pos + 30]!r} in {expr!r}")
        pos = m.end()
        kind = m.lastgroup
        if kind in ("ws", "comment"):
            continue
        out.append((kind, m.group(kind)))
    return out


def _unquote(s):
    return s[1:-1]


def selectors(expr):
    """[(metric name, {label: op})] for every vector selector of EXPR."""
    toks = tokenize(expr)
    result = []
    i = 0
    n = len(toks)

    def parse_matchers(j):  # toks[j] is "{"; returns (labels, index after "}")
        labels = {}
        j += 1
        while j < n and toks[j][1] != "}":
            if toks[j][0] == "ident" and j + 2 < n and toks[j + 1][0] == "op" and toks[j + 2][0] == "string":
                labels[toks[j][1]] = (toks[j + 1][1], _unquote(toks[j + 2][1]))
                j += 3
            elif toks[j][1] == ",":
                j += 1
            else:
                raise ValueError(f"bad label matcher near {toks[j]} in {expr!r}")
        return labels, j + 1

    while i < n:
        kind, text = toks[i]
        nxt = toks[i + 1][1] if i + 1 < n else None
        if kind == "op" and text == "[":
            depth = 1
            i += 1
            while i < n and depth:
                depth += {"[": 1, "]": -1}.get(toks[i][1], 0)
                i += 1
            continue
        if kind == "ident" and text in GROUPING:
            i += 1
            if i < n and toks[i][1] == "(":
                while i < n and toks[i][1] != ")":
                    i += 1
                i += 1
            continue
        if kind == "ident" and (nxt == "(" or (nxt in ("by", "without") and text in AGGREGATIONS)):
            i += 1  # function call, or aggregation (`sum by (x) (...)`)
            continue
        if kind == "ident" and (text in KEYWORDS or text.lower() in ("inf", "nan")):
            i += 1
            continue
        if kind == "ident":
            labels = {}
            i += 1
            if i < n and toks[i][1] == "{":
                labels, i = parse_matchers(i)
            result.append((text, labels))
            continue
        if kind == "op" and text == "{":  # {__name__="x", ...}
            labels, i = parse_matchers(i)
            name = labels.pop("__name__", (None, None))
            result.append((name[1] if name[0] == "=" else None, labels))
            continue
        i += 1
    return result


def _group_labels(toks, i):
    """toks[i] is "(" after by: ([label names], index after ")")."""
    labels = []
    i += 1
    while i < len(toks) and toks[i][1] != ")":
        if toks[i][0] == "ident":
            labels.append(toks[i][1])
        i += 1
    return labels, i + 1


def _close(toks, i):
    """toks[i] is "(": index of its matching ")"."""
    depth = 0
    for j in range(i, len(toks)):
        depth += {"(": 1, ")": -1}.get(toks[j][1], 0) if toks[j][0] == "op" else 0
        if depth == 0:
            return j
    raise ValueError(f"unbalanced parentheses in {' '.join(t for _, t in toks)!r}")


def groupings(expr):
    """[(set of `by` labels, [metric names aggregated])] for every `AGG by (...)` of EXPR.

    Both forms: `sum by (a) (x)` and `sum(x) by (a)`. Aggregations whose
    argument rewrites labels (label_replace, label_join) are left out.
    """
    toks = tokenize(expr)
    out = []
    for i, (kind, text) in enumerate(toks):
        if kind != "ident" or text not in AGGREGATIONS or i + 1 >= len(toks):
            continue
        nxt = toks[i + 1][1]
        if nxt == "by" and i + 2 < len(toks) and toks[i + 2][1] == "(":
            labels, j = _group_labels(toks, i + 2)
            if j >= len(toks) or toks[j][1] != "(":
                continue
            inner = toks[j + 1:_close(toks, j)]
        elif nxt == "(":
            end = _close(toks, i + 1)
            if end + 2 >= len(toks) or toks[end + 1][1] != "by" or toks[end + 2][1] != "(":
                continue
            labels, _ = _group_labels(toks, end + 2)
            inner = toks[i + 2:end]
        else:
            continue
        if any(t in ("label_replace", "label_join") for _, t in inner):
            continue
        names = [n for n, _ in selectors(" ".join(t for _, t in inner)) if n]
        out.append((set(labels), names))
    return out


def dashboard_exprs(path):
    """[(where, expr)] of a Grafana dashboard JSON: panel targets and variable queries."""
    with open(path) as f:
        dash = json.load(f)
    out = []

    def walk_panels(panels):
        for p in panels or []:
            for t in p.get("targets") or []:
                if t.get("expr"):
                    out.append((f"{os.path.basename(path)} panel {p.get('title')!r}", t["expr"]))
            walk_panels(p.get("panels"))

    walk_panels(dash.get("panels"))
    for v in (dash.get("templating") or {}).get("list") or []:
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = re.match(r"^\s*label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$", q or "")
        if m:
            # label_values(SELECTOR, LABEL): LABEL must exist on SELECTOR's metric.
            sel = m.group(1)
            if "{" in sel:
                sel = sel[:-1] + f', {m.group(2)}=~".*"}}'
            else:
                sel = sel + f'{{{m.group(2)}=~".*"}}'
            out.append((f"{os.path.basename(path)} variable {v.get('name')}", sel))
        elif q:
            out.append((f"{os.path.basename(path)} variable {v.get('name')}", q))
    return out


def rule_exprs(path):
    doc = deploylib.load_yaml(path) or {}
    groups = doc.get("groups") or (doc.get("spec") or {}).get("groups") or []
    out = []
    for g in groups:
        for r in g.get("rules") or []:
            out.append((f"{os.path.basename(path)} {r.get('alert') or r.get('record')}", r["expr"]))
    return out


def adapter_exprs(path):
    doc = deploylib.load_yaml(path) or {}
    out = []
    for r in (doc.get("rules") or {}).get("custom") or []:
        series = r.get("seriesQuery", "")
        name = (r.get("name") or {}).get("as")
        first = selectors(series)[0][0] if series else None
        out.append((f"prometheus-adapter {name} seriesQuery", series))
        if r.get("metricsQuery"):
            out.append((f"prometheus-adapter {name} metricsQuery", substitute_templates(r["metricsQuery"], first)))
    return out


def all_exprs(deploy):
    exprs = []
    for p in sorted(glob.glob(os.path.join(deploy, "grafana", "dashboards", "*.json"))):
        exprs += dashboard_exprs(p)
    for p in sorted(glob.glob(os.path.join(deploy, "prometheus", "*.yml"))):
        doc = deploylib.load_yaml(p) or {}
        if "groups" in doc:
            exprs += rule_exprs(p)
    exprs += rule_exprs(os.path.join(deploy, "k8s", "base", "prometheusrule.yaml"))
    exprs += adapter_exprs(os.path.join(deploy, "k8s", "prometheus-adapter", "values.yaml"))
    return [(w, substitute_templates(e)) for w, e in exprs]


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:\\.|[^"\\])*"')


def parse_exposition(text):
    """{sample name: set of label names} of a Prometheus text exposition."""
    names = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = set(_LABEL.findall(m.group(3) or ""))
        names.setdefault(m.group(1), set()).update(labels)
    return names


def check_exprs(report, exprs, exported):
    """Checks every selector of EXPRS against EXPORTED; returns {metric: set of places}."""
    used = {}
    seen = set()
    for where, expr in exprs:
        try:
            sels = selectors(expr)
        except ValueError as e:
            report.fail(f"{where}: {e}")
            continue
        report.check(bool(sels), f"{where}: no metric in {expr!r}")
        for name, labels in sels:
            if not report.check(name is not None, f"{where}: selector without a metric name in {expr!r}"):
                continue
            used.setdefault(name, set()).add(where)
            if name in SYNTHETIC or (where, name) in seen:
                continue
            seen.add((where, name))
            if not report.check(name in exported, f"{where}: metric {name} is not exported by rankd's /metrics"):
                continue
            for label in labels:
                report.check(label in exported[name] or label in TARGET_LABELS
                             or (label == "le" and name.endswith("_bucket")),
                             f"{where}: {name} has no label {label!r} (its labels: {sorted(exported[name])})")
        try:
            groups = groupings(expr)
        except ValueError as e:
            report.fail(f"{where}: {e}")
            continue
        for labels, names in groups:
            names = [n for n in names if n in exported]
            if not names:  # nothing known to compare with (reported above, or synthetic)
                continue
            for label in sorted(labels):
                report.check(label in TARGET_LABELS or any(label in exported[n] for n in names)
                             or (label == "le" and any(n.endswith("_bucket") for n in names)),
                             f"{where}: by ({label}) over {sorted(set(names))}, none of which has label {label!r}")
    return used


def self_test():
    cases = {
        'sum by (model, code) (rate(rankd_requests_total{model=~"$model", code!="OK"}[5m]))':
            [("rankd_requests_total", {"model", "code"})],
        'histogram_quantile(0.99, sum(rate(a_bucket[5m])) by (le)) > 0.05 and on (job) b_count offset 1h':
            [("a_bucket", set()), ("b_count", set())],
        'x / clamp_min(y{le="+Inf"}, 1e-9) or vector(0) unless z[5m:1m]':
            [("x", set()), ("y", {"le"}), ("z", set())],
        '{__name__="named", job="j"} + Inf - nan':
            [("named", {"job"})],
        'count by (version, backend) (rankd_build_info{instance=~"$instance"})':
            [("rankd_build_info", {"instance"})],
    }
    bad = 0
    for expr, want in cases.items():
        got = [(n, set(l)) for n, l in selectors(substitute_templates(expr))]
        if got != want:
            print(f"FAIL [self-test]: {expr!r}: got {got}, want {want}", file=sys.stderr)
            bad += 1
    group_cases = {
        'histogram_quantile(0.99, sum by (model, version, le) (rate(h_bucket{model=~"$model"}[5m])))':
            [({"model", "version", "le"}, ["h_bucket"])],
        'sum(rate(a[5m])) by (job) / on (job) group_left count by (x) (b)':
            [({"job"}, ["a"]), ({"x"}, ["b"])],
        'max by (t) (label_replace(m, "t", "$1", "code", "(.*)")) + sum without (code) (m)': [],
    }
    for expr, want in group_cases.items():
        got = [(l, n) for l, n in groupings(substitute_templates(expr))]
        if got != want:
            print(f"FAIL [self-test]: groupings {expr!r}: got {got}, want {want}", file=sys.stderr)
            bad += 1
    got = selectors(substitute_templates("rate(q_sum{<<.LabelMatchers>>}[$__rate_interval]) by (<<.GroupBy>>)"))
    if got != [("q_sum", {"namespace": ("!=", "")})]:
        print(f"FAIL [self-test]: adapter/Grafana templates: {got}", file=sys.stderr)
        bad += 1
    try:
        tokenize('rate(x[5m]) $$$')
        print("FAIL [self-test]: garbage tokenized", file=sys.stderr)
        bad += 1
    except ValueError:
        pass
    # The comparison itself: a missing metric and a missing label are caught.
    exported = parse_exposition('# TYPE m counter\nm{model="a",code="OK"} 1\nh_bucket{model="a",le="1"} 0\n')
    comparisons = (('sum by (code) (rate(m{model="x"}[5m]))', 0), ('rate(h_bucket{le="1"}[5m])', 0),
                   ('m{table="t"}', 1), ('rate(nope_total[5m]) / m', 1), ('up{job="rankd"}', 0),
                   ('sum by (model, version) (rate(m[5m]))', 1), ('sum(m) by (instance, code)', 0),
                   ('histogram_quantile(0.5, sum by (model, le) (rate(h_bucket[5m])))', 0),
                   ('sum by (le) (m)', 1), ('sum by (version) (up) + sum by (table) (m)', 1))
    for expr, want_errors in comparisons:
        r = deploylib.Report("self-test")
        check_exprs(r, [("case", expr)], exported)
        if len(r.errors) != want_errors:
            print(f"FAIL [self-test]: {expr!r}: {len(r.errors)} errors {r.errors}, want {want_errors}", file=sys.stderr)
            bad += 1
    if bad:
        sys.exit(1)
    print(f"promql self-test: {len(cases) + len(group_cases) + 2 + len(comparisons)} cases passed")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--deploy")
    ap.add_argument("--metrics", help="a /metrics scrape of a running rankd")
    ap.add_argument("--rules_out", help="write every expression as a recording rule here")
    ap.add_argument("--min_names", type=int, default=10,
                    help="fail if fewer distinct metric names are found (the parser found nothing)")
    ap.add_argument("--self_test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        if not args.deploy:
            return
    report = deploylib.Report("metrics drift")
    exprs = all_exprs(args.deploy)
    report.check(any("panel" in w for w, _ in exprs), "no dashboard panel expressions found")
    report.check(any("Rankd" in w for w, _ in exprs), "no alert rule expressions found")
    if args.rules_out:
        rules = [{"record": f"deploy_check:expr_{i}", "expr": e} for i, (_, e) in enumerate(exprs)]
        with open(args.rules_out, "w") as f:
            json.dump({"groups": [{"name": "deploy_exprs", "rules": rules}]}, f, indent=1)
    with open(args.metrics) as f:
        exported = parse_exposition(f.read())
    report.check(len(exported) > 10, f"the scrape holds only {len(exported)} sample names")
    used = check_exprs(report, exprs, exported)
    rankd_used = sorted(n for n in used if n.startswith("rankd_"))
    report.check(len(rankd_used) >= args.min_names,
                 f"only {len(rankd_used)} rankd metric names found in the PromQL ({rankd_used}): parser broken?")
    print(f"{len(exprs)} expressions use {len(used)} metric names:")
    for n in sorted(used):
        print(f"  {n}  ({len(used[n])} uses){'  [synthetic]' if n in SYNTHETIC else ''}")
    report.finish()


if __name__ == "__main__":
    main()
