#!/usr/bin/python3
"""Wiring of the compose stack, Prometheus, Grafana and the alert rules (no Docker here).

Usage: config_check.py --deploy DIR --serve_help FILE --gen_model_help FILE [--self_test]

compose/compose.yaml (+ compose.gpu.yaml):
  - build context / Dockerfile exist, build targets are Dockerfile stages,
    each built image is tagged rankd:<target> (as scripts/build_image.sh and
    `docker build --target` tag them);
  - the rankd service runs its image's ENTRYPOINT (rankd) with its command,
    and serves gRPC on the port the image's HEALTHCHECK checks (Docker runs
    that HEALTHCHECK under compose);
  - every bind-mounted file or directory exists; named volumes are declared;
  - rankd and the model generator use flags rankd has; stop_grace_period
    exceeds --drain_timeout; the GPU override reserves an NVIDIA GPU and
    serves --backend=cuda;
  - Prometheus' config and rule files are mounted where its command and
    prometheus.yml expect them, and it scrapes the rankd service on the
    port rankd serves /metrics on;
  - Grafana's provisioning is mounted; its data source URL is the
    Prometheus service; the dashboard provider's path is where the
    dashboards directory is mounted.
dashboards: valid JSON with a uid, unique panel ids, every panel on the
  "datasource" variable, panels within the 24-column grid, and the panels
  the issues ask for (requests by code, p50/p99, queue vs compute, batch
  size, candidates/s, cache hit rate, model readiness; model lifecycle:
  versions by state, loads by result, load duration p50/p99, request rate,
  error ratio and p99 by version).
alerts: every alert of alerts.yml has a firing case in alerts_test.yml, and
  the ones the issues ask for exist (error ratio, p99 over SLO, queue
  saturation, model not ready; failed model loads, a model without a ready
  version).
"""

import argparse
import copy
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib  # noqa: E402
from dockerfile_check import runtime_config  # noqa: E402


def parse_stages(dockerfile):
    with open(dockerfile) as f:
        return set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", f.read(), re.M | re.I))


def image_tag(image):
    name = (image or "").split("@")[0].rsplit("/", 1)[-1]
    return name.split(":", 1)[1] if ":" in name else None


def merge(a, b):
    """Compose's merge of an override file B into A (mappings merge, the rest replaces)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = merge(a[k], v) if k in a else v
        return out
    return copy.deepcopy(b)


def expand(value):
    """${VAR:-default} / ${VAR-default} -> default (what an unset environment gives)."""
    return re.sub(r"\$\{\w+:?-([^}]*)\}", r"\1", value)


def volume_parts(v):
    if isinstance(v, dict):
        return v.get("source"), v.get("target"), v.get("type")
    parts = expand(v).split(":")
    src, tgt = (parts[0], parts[1]) if len(parts) > 1 else (None, parts[0])
    kind = "bind" if src and (src.startswith(".") or src.startswith("/")) else "volume"
    return src, tgt, kind


def flags(argv):
    out = {}
    for a in argv:
        f = deploylib.split_flag(a)
        if f:
            out[f[0]] = f[1]
    return out


def check_compose(report, deploy, compose, ctx, label):
    cdir = os.path.join(deploy, "compose")
    services = compose.get("services") or {}
    declared = set((compose.get("volumes") or {}).keys())
    for required in ("rankd", "prometheus", "grafana"):
        report.check(required in services, f"{label}: no service {required}")
    if not all(r in services for r in ("rankd", "prometheus", "grafana")):
        return
    stages = None
    images = {}  # service -> runtime_config of the stage it builds
    for name, svc in services.items():
        b = svc.get("build")
        if b:
            ctxdir = os.path.normpath(os.path.join(cdir, b.get("context", ".")))
            dockerfile = os.path.join(ctxdir, b.get("dockerfile", "Dockerfile"))
            if report.check(os.path.isfile(dockerfile), f"{label}: service {name} builds {dockerfile}, which does not exist"):
                stages = parse_stages(dockerfile)
                report.check(b.get("target") in stages, f"{label}: service {name} builds target {b.get('target')}, not a stage")
                report.check(image_tag(svc.get("image")) == b.get("target"),
                             f"{label}: service {name} builds target {b.get('target')} but names it {svc.get('image')!r}, "
                             f"not rankd:{b.get('target')}")
                images[name] = runtime_config(dockerfile).get(b.get("target"))
        for v in svc.get("volumes") or []:
            src, tgt, kind = volume_parts(v)
            if kind == "bind":
                report.check(os.path.exists(os.path.normpath(os.path.join(cdir, src))),
                             f"{label}: service {name} mounts {src}, which does not exist")
            elif src:
                report.check(src in declared, f"{label}: service {name} uses undeclared volume {src}")

    # rankd.
    rankd = services["rankd"]
    cmd = rankd.get("command") or []
    report.check(cmd[:1] == ["serve"], f"{label}: rankd command must start with serve")
    fl = flags(cmd[1:])
    for f in fl:
        report.check(f in ctx.serve_flags, f"{label}: rankd serve has no flag --{f}")
    metrics_port = int(fl.get("metrics_port") or ctx.serve_flags["metrics_port"])
    grpc_port = int(fl.get("grpc_port") or ctx.serve_flags["grpc_port"])
    drain = deploylib.parse_duration(fl.get("drain_timeout") or ctx.serve_flags["drain_timeout"])
    grace = deploylib.parse_duration(str(rankd.get("stop_grace_period", "10s")))
    report.check(grace is not None and drain is not None and grace > drain,
                 f"{label}: rankd stop_grace_period {rankd.get('stop_grace_period')} must exceed --drain_timeout")
    ports = [str(p) for p in rankd.get("ports") or []]
    report.check(any(p.endswith(f":{grpc_port}") for p in ports), f"{label}: rankd does not publish gRPC port {grpc_port}")
    image = images.get("rankd")
    if report.check(image is not None, f"{label}: the rankd service builds no runtime stage of the Dockerfile"):
        if not rankd.get("entrypoint"):
            report.check(image["entrypoint"] == ["rankd"],
                         f"{label}: rankd's command is rankd's, but its image's ENTRYPOINT is {image['entrypoint']}")
        report.check(image["healthcheck_port"] == grpc_port,
                     f"{label}: rankd serves gRPC on {grpc_port}, the image's HEALTHCHECK checks "
                     f"{image['healthcheck_port']}: Docker would mark it unhealthy")
    mounts = {volume_parts(v)[1]: volume_parts(v) for v in rankd.get("volumes") or []}
    model_root = fl.get("model_root") or ctx.serve_flags["model_root"]
    report.check(model_root in mounts, f"{label}: nothing mounted at rankd's --model_root {model_root}")
    models = services.get("models")
    if models:
        text = " ".join(models.get("command") or [])
        for m in re.finditer(r"rankd gen-model ([^;&|]*)", text):
            for a in m.group(1).split():
                f = deploylib.split_flag(a)
                if f:
                    report.check(f[0] in ctx.gen_model_flags, f"{label}: rankd gen-model has no flag --{f[0]}")
        report.check((rankd.get("depends_on") or {}).get("models", {}).get("condition") == "service_completed_successfully",
                     f"{label}: rankd must wait for the models service to complete")
        mm = {volume_parts(v)[1]: volume_parts(v)[0] for v in models.get("volumes") or []}
        report.check(mm.get(model_root) == mounts.get(model_root, (None,))[0],
                     f"{label}: the models service writes another volume than rankd serves")

    # Prometheus.
    prom = services["prometheus"]
    pm = {volume_parts(v)[1]: volume_parts(v)[0] for v in prom.get("volumes") or []}
    pcmd = prom.get("command") or []
    cfg = next((a.split("=", 1)[1] for a in pcmd if a.startswith("--config.file=")), "/etc/prometheus/prometheus.yml")
    if report.check(cfg in pm, f"{label}: Prometheus config {cfg} is not mounted"):
        host_cfg = os.path.normpath(os.path.join(cdir, pm[cfg]))
        pconf = deploylib.load_yaml(host_cfg)
        for rf in pconf.get("rule_files") or []:
            in_container = os.path.normpath(os.path.join(os.path.dirname(cfg), rf))
            report.check(in_container in pm, f"{label}: rule file {in_container} is not mounted into Prometheus")
        targets = [t for j in pconf.get("scrape_configs") or [] for sc in j.get("static_configs") or []
                   for t in sc.get("targets") or []]
        report.check(f"rankd:{metrics_port}" in targets,
                     f"{label}: Prometheus scrapes {targets}, not rankd:{metrics_port} (rankd's metrics port)")
        for t in targets:
            report.check(t.split(":")[0] in services, f"{label}: Prometheus scrapes {t}, not a compose service")
    prom_port = next((a.rsplit(":", 1)[1] for a in pcmd if a.startswith("--web.listen-address=")), "9090")

    # Grafana.
    graf = services["grafana"]
    gm = {volume_parts(v)[1]: volume_parts(v)[0] for v in graf.get("volumes") or []}
    prov = gm.get("/etc/grafana/provisioning")
    if report.check(prov is not None, f"{label}: Grafana provisioning is not mounted at /etc/grafana/provisioning"):
        pdir = os.path.normpath(os.path.join(cdir, prov))
        for f in glob.glob(os.path.join(pdir, "datasources", "*.y*ml")):
            for ds in deploylib.load_yaml(f).get("datasources") or []:
                if ds.get("type") == "prometheus":
                    report.check(ds.get("url") == f"http://prometheus:{prom_port}",
                                 f"{label}: Grafana data source {ds.get('url')} is not the prometheus service")
        providers = [p for f in glob.glob(os.path.join(pdir, "dashboards", "*.y*ml"))
                     for p in deploylib.load_yaml(f).get("providers") or []]
        report.check(bool(providers), f"{label}: no Grafana dashboard provider")
        for p in providers:
            path = (p.get("options") or {}).get("path")
            src = gm.get(path)
            ok = report.check(src is not None, f"{label}: dashboard provider path {path} is not a Grafana mount")
            if ok:
                report.check(glob.glob(os.path.join(os.path.normpath(os.path.join(cdir, src)), "*.json")),
                             f"{label}: no dashboard JSON in {src}")


def check_gpu_override(report, compose):
    rankd = compose["services"]["rankd"]
    cmd = rankd.get("command") or []
    report.check("--backend=cuda" in cmd, "compose GPU override: rankd must serve --backend=cuda")
    report.check((rankd.get("build") or {}).get("target") == "gpu", "compose GPU override: rankd must build target gpu")
    devices = (((rankd.get("deploy") or {}).get("resources") or {}).get("reservations") or {}).get("devices") or []
    report.check(any(d.get("driver") == "nvidia" and "gpu" in (d.get("capabilities") or []) for d in devices),
                 "compose GPU override: no NVIDIA GPU reserved for rankd")


REQUIRED_PANELS = {
    "request rate by code": r"sum by \(code\) \(rate\(rankd_requests_total",
    "p50 latency": r"histogram_quantile\(0\.5, [^\n]*rankd_request_duration_seconds_bucket",
    "p99 latency": r"histogram_quantile\(0\.99, [^\n]*rankd_request_duration_seconds_bucket",
    "queue time": r"rankd_queue_duration_seconds",
    "compute time": r"rankd_compute_duration_seconds",
    "batch size": r"rankd_batch_candidates",
    "candidates/s": r"rate\(rankd_candidates_total",
    "cache hit rate": r"rankd_embedding_cache_hits_total[^\n]*rankd_embedding_cache_misses_total",
    "model readiness": r"rankd_model_ready",
    "model versions by state": r"sum by \(model, state\) \(rankd_model_versions",
    "model loads by result": r"sum by \(model, result\) \(rate\(rankd_model_loads_total",
    "model load duration p50": r"histogram_quantile\(0\.5, [^\n]*rankd_model_load_duration_seconds_bucket",
    "model load duration p99": r"histogram_quantile\(0\.99, [^\n]*rankd_model_load_duration_seconds_bucket",
    "request rate by version": r"sum by \(model, version\) \(rate\(rankd_requests_total",
    "error ratio by version": r"sum by \(model, version\) \(rate\(rankd_requests_total\{[^}\n]*code=~[^\n]*/ sum by \(model, version\)",
    "p99 latency by version": r"histogram_quantile\(0\.99, sum by \(model, version, le\) \(rate\(rankd_request_duration_seconds_bucket",
}


def check_dashboard(report, path):
    name = os.path.basename(path)
    with open(path) as f:
        try:
            dash = json.load(f)
        except ValueError as e:
            report.fail(f"{name}: not JSON: {e}")
            return
    report.check(bool(dash.get("uid")) and bool(dash.get("title")), f"{name}: needs uid and title")
    variables = {v.get("name"): v for v in (dash.get("templating") or {}).get("list") or []}
    ds_var = variables.get("datasource") or {}
    report.check(ds_var.get("type") == "datasource" and ds_var.get("query") == "prometheus",
                 f"{name}: needs a Prometheus data source variable named datasource")
    ids = []
    exprs = []

    def walk(panels):
        for p in panels or []:
            ids.append(p.get("id"))
            gp = p.get("gridPos") or {}
            report.check(gp.get("x", 0) + gp.get("w", 0) <= 24, f"{name}: panel {p.get('title')!r} exceeds the grid")
            if p.get("type") != "row":
                ds = (p.get("datasource") or {}).get("uid")
                report.check(ds == "${datasource}", f"{name}: panel {p.get('title')!r} uses data source {ds!r}")
                targets = p.get("targets") or []
                report.check(bool(targets), f"{name}: panel {p.get('title')!r} has no queries")
                for t in targets:
                    report.check(bool(t.get("expr")), f"{name}: panel {p.get('title')!r} has an empty query")
                    report.check((t.get("datasource") or {}).get("uid") == "${datasource}",
                                 f"{name}: a query of {p.get('title')!r} bypasses the datasource variable")
                    exprs.append(t.get("expr") or "")
            walk(p.get("panels"))

    walk(dash.get("panels"))
    report.check(len(ids) == len(set(ids)), f"{name}: duplicate panel ids")
    text = "\n".join(exprs)
    for what, rx in REQUIRED_PANELS.items():
        report.check(re.search(rx, text) is not None, f"{name}: no panel for {what} (/{rx}/)")


REQUIRED_ALERTS = {
    "error ratio": r"rankd_requests_total\{code=~",
    "p99 over SLO": r"histogram_quantile\(0\.99,.*rankd_request_duration_seconds_bucket",
    "queue saturation": r"rankd_queue_duration_seconds",
    "model not ready": r"rankd_model_ready\s*==\s*0",
    "failed model loads": r'increase\(rankd_model_loads_total\{result="failed"\}',
    "model without a ready version": r'rankd_model_versions\{state="ready"\}\)?\s*==\s*0',
}


def check_alerts(report, deploy):
    alerts = deploylib.load_yaml(os.path.join(deploy, "prometheus", "alerts.yml"))
    tests = deploylib.load_yaml(os.path.join(deploy, "prometheus", "alerts_test.yml"))
    rules = [r for g in alerts.get("groups") or [] for r in g.get("rules") or []]
    fired = {a.get("alertname") for t in tests.get("tests") or [] for a in t.get("alert_rule_test") or []
             if a.get("exp_alerts")}
    for r in rules:
        if "alert" in r:
            report.check(r["alert"] in fired, f"alert {r['alert']} has no firing case in alerts_test.yml")
            report.check((r.get("labels") or {}).get("severity") in ("page", "warning", "info"),
                         f"alert {r['alert']}: severity must be page, warning or info")
            report.check(bool((r.get("annotations") or {}).get("summary")), f"alert {r['alert']} has no summary")
    text = "\n".join(" ".join(r.get("expr", "").split()) for r in rules)
    for what, rx in REQUIRED_ALERTS.items():
        report.check(re.search(rx, text) is not None, f"no alert for {what} (/{rx}/)")


class Ctx:
    pass


def run_all(report, deploy, ctx, compose=None, gpu=None):
    cdir = os.path.join(deploy, "compose")
    compose = compose if compose is not None else deploylib.load_yaml(os.path.join(cdir, "compose.yaml"))
    gpu = gpu if gpu is not None else deploylib.load_yaml(os.path.join(cdir, "compose.gpu.yaml"))
    check_compose(report, deploy, compose, ctx, "compose.yaml")
    merged = merge(compose, gpu)
    check_compose(report, deploy, merged, ctx, "compose.yaml + compose.gpu.yaml")
    check_gpu_override(report, merged)
    dashboards = sorted(glob.glob(os.path.join(deploy, "grafana", "dashboards", "*.json")))
    report.check(bool(dashboards), "no Grafana dashboards")
    for d in dashboards:
        check_dashboard(report, d)
    check_alerts(report, deploy)
    return compose, gpu


def self_test(deploy, ctx, compose, gpu):
    def svc(c, name):
        return c["services"][name]

    mutations = {
        "scrape the wrong port": lambda c, g: svc(c, "rankd").update(
            command=svc(c, "rankd")["command"] + ["--metrics_port=9000"]),
        "grace period under the drain timeout": lambda c, g: svc(c, "rankd").update(stop_grace_period="20s"),
        "unknown flag": lambda c, g: svc(c, "rankd")["command"].append("--no_such_flag=1"),
        "missing mount": lambda c, g: svc(c, "prometheus")["volumes"].append("../prometheus/nope.yml:/etc/x.yml:ro"),
        "rules not mounted": lambda c, g: svc(c, "prometheus").update(volumes=[
            v for v in svc(c, "prometheus")["volumes"] if "alerts.yml" not in v]),
        "dashboards elsewhere": lambda c, g: svc(c, "grafana").update(volumes=[
            v.replace("/var/lib/grafana/dashboards", "/dashboards") for v in svc(c, "grafana")["volumes"]]),
        "unknown build target": lambda c, g: g["services"]["rankd"]["build"].update(target="cuda"),
        "image named unlike its target": lambda c, g: g["services"]["rankd"].update(image="rankd:cpu"),
        "gRPC port the HEALTHCHECK does not check": lambda c, g: svc(c, "rankd").update(
            command=svc(c, "rankd")["command"] + ["--grpc_port=9500"], ports=["9500:9500"]),
        "no GPU reserved": lambda c, g: g["services"]["rankd"].pop("deploy"),
    }
    missed = []
    for what, mutate in mutations.items():
        c2, g2 = copy.deepcopy(compose), copy.deepcopy(gpu)
        mutate(c2, g2)
        r = deploylib.Report(what)
        run_all(r, deploy, ctx, c2, g2)
        if not r.errors:
            missed.append(what)
    for m in missed:
        print(f"FAIL [self-test]: mutation not caught: {m}", file=sys.stderr)
    if missed:
        sys.exit(1)
    print(f"self-test: {len(mutations)} mutations caught")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--deploy", required=True)
    ap.add_argument("--serve_help", required=True)
    ap.add_argument("--gen_model_help", required=True)
    ap.add_argument("--self_test", action="store_true")
    args = ap.parse_args()
    ctx = Ctx()
    with open(args.serve_help) as f:
        ctx.serve_flags = deploylib.parse_help_flags(f.read())
    with open(args.gen_model_help) as f:
        ctx.gen_model_flags = deploylib.parse_help_flags(f.read())
    report = deploylib.Report("config")
    compose, gpu = run_all(report, args.deploy, ctx)
    report.finish()
    if args.self_test:
        self_test(args.deploy, ctx, compose, gpu)


if __name__ == "__main__":
    main()
