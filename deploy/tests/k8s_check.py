#!/usr/bin/python3
"""Checks the Kubernetes manifests of deploy/k8s as rendered by `kubectl kustomize`.

Usage (deploy/tests/k8s_test.sh runs it):
  k8s_check.py --rendered DIR --deploy DEPLOY_DIR --serve_help FILE --gen_model_help FILE
      DIR holds one OVERLAY.yaml per rendered overlay (and base.yaml).
  k8s_check.py --self_test ...      also mutates the GPU overlay in memory and
      requires every mutation to be caught (the checks can fail).
  k8s_check.py --write-prometheusrule [--deploy DEPLOY_DIR]
      regenerates k8s/base/prometheusrule.yaml from prometheus/alerts.yml.

What it checks, per overlay (see check_overlay):
  - probes: startup, readiness and liveness are native gRPC probes
    (grpc.health.v1) on the container's grpc port, which is --grpc_port;
  - drain: terminationGracePeriodSeconds > preStop sleep + --drain_timeout;
  - GPU: the gpu overlay (and any pod run with --backend=cuda) limits
    nvidia.com/gpu >= 1; the other overlays request no GPU and run
    --backend=cpu;
  - non-root: every container runs with runAsNonRoot, a non-zero uid equal to
    its image's USER, no privilege escalation, all capabilities dropped, a
    read-only root filesystem;
  - images: each container's image is rankd:<stage>, a runtime stage of
    deploy/docker/Dockerfile (the tag `docker build --target <stage>` and
    scripts/build_image.sh give it), whose ENTRYPOINT is rankd, so the
    container's args are rankd's (no command override); --backend=cuda runs
    the gpu image (cuBLASLt);
  - every rankd flag used exists (`rankd serve --help`, `gen-model --help`);
  - resources, image tags, volumes, Services, headless Service,
    ServiceMonitor (job name = the compose stack's scrape job), HPA (its
    metric is the one prometheus-adapter serves), PDB, PrometheusRule
    (= prometheus/alerts.yml).
"""

import argparse
import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib  # noqa: E402
from dockerfile_check import runtime_config  # noqa: E402

GRPC_HEALTH_PROBES = ("startupProbe", "readinessProbe", "livenessProbe")
NON_GRPC_HANDLERS = ("httpGet", "tcpSocket", "exec")


def by_kind(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def one(report, docs, kind, name, where):
    found = [d for d in docs if d.get("kind") == kind and d["metadata"].get("name") == name]
    report.check(len(found) == 1, f"{where}: expected one {kind} {name}, found {len(found)}")
    return found[0] if found else None


def image_stage(image):
    """The Dockerfile stage of an image named rankd:<stage> (None: no tag)."""
    name = image.split("@")[0].rsplit("/", 1)[-1]
    return name.split(":", 1)[1] if ":" in name else None


def user_uid(user):
    uid = (user or "").split(":")[0]
    return int(uid) if uid.isdigit() else None


def check_image(report, where, c, images):
    """C's image is a runtime stage whose ENTRYPOINT takes C's args; returns
    the stage's configuration (runtime_config), or None."""
    image = c.get("image", "")
    stage = image_stage(image)
    cfg = images.get(stage)
    if not report.check(cfg is not None,
                        f"{where}: image {image!r} is not rankd:<stage> of a runtime stage of deploy/docker/Dockerfile "
                        f"({sorted(images)}), the tags `docker build --target <stage>` and scripts/build_image.sh use"):
        return None
    if not c.get("command"):
        report.check(cfg["entrypoint"] == ["rankd"],
                     f"{where}: the args are rankd's, but image {image!r} has ENTRYPOINT {cfg['entrypoint']}")
    return cfg


def flags_of(args):
    out = {}
    for a in args:
        f = deploylib.split_flag(a)
        if f:
            out[f[0]] = f[1]
    return out


def check_container_security(report, where, pod_sc, c, image_uid):
    sc = c.get("securityContext") or {}
    uid = sc.get("runAsUser", pod_sc.get("runAsUser"))
    non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
    report.check(non_root is True, f"{where}: runAsNonRoot is not true")
    report.check(isinstance(uid, int) and uid != 0, f"{where}: runAsUser is {uid!r}, want a non-zero uid")
    if image_uid is not None:
        report.check(uid == image_uid,
                     f"{where}: runAsUser {uid} differs from its image's USER {image_uid} (deploy/docker/Dockerfile)")
    report.check(sc.get("allowPrivilegeEscalation") is False, f"{where}: allowPrivilegeEscalation is not false")
    report.check(sc.get("readOnlyRootFilesystem") is True, f"{where}: readOnlyRootFilesystem is not true")
    drop = ((sc.get("capabilities") or {}).get("drop")) or []
    report.check("ALL" in drop, f"{where}: capabilities.drop lacks ALL")
    report.check(not sc.get("privileged"), f"{where}: privileged")


def check_resources(report, where, c):
    res = c.get("resources") or {}
    req = res.get("requests") or {}
    lim = res.get("limits") or {}
    report.check("cpu" in req and "memory" in req, f"{where}: resources.requests needs cpu and memory, has {sorted(req)}")
    report.check("memory" in lim, f"{where}: resources.limits needs memory")


def check_overlay(report, name, docs, ctx):
    where = f"overlay {name}"
    dep = one(report, docs, "Deployment", "rankd", where)
    if dep is None:
        return
    tmpl = dep["spec"]["template"]
    pod = tmpl["spec"]
    pod_labels = tmpl["metadata"].get("labels") or {}
    pod_sc = pod.get("securityContext") or {}
    containers = pod.get("containers") or []
    inits = pod.get("initContainers") or []
    rankd = [c for c in containers if c.get("name") == "rankd"]
    if not report.check(len(rankd) == 1, f"{where}: no container named rankd"):
        return
    c = rankd[0]
    args = c.get("args") or []
    report.check(args[:1] == ["serve"], f"{where}: rankd args must start with the serve command, got {args[:1]}")
    flags = flags_of(args[1:])
    for f in flags:
        report.check(f in ctx.serve_flags, f"{where}: rankd serve has no flag --{f}")
    report.check(not c.get("command"), f"{where}: rankd container overrides the image entrypoint (command)")

    # Ports: the grpc port is --grpc_port.
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports") or []}
    grpc_port = int(flags.get("grpc_port") or ctx.serve_flags.get("grpc_port"))
    metrics_port = int(flags.get("metrics_port") or ctx.serve_flags.get("metrics_port"))
    report.check(ports.get("grpc") == grpc_port, f"{where}: container port 'grpc' is {ports.get('grpc')}, --grpc_port is {grpc_port}")
    report.check(ports.get("metrics") == metrics_port,
                 f"{where}: container port 'metrics' is {ports.get('metrics')}, --metrics_port is {metrics_port}")

    # Probes: native gRPC health checks on the gRPC port.
    for probe_name in GRPC_HEALTH_PROBES:
        probe = c.get(probe_name)
        if not report.check(probe is not None, f"{where}: no {probe_name}"):
            continue
        grpc = probe.get("grpc")
        report.check(isinstance(grpc, dict), f"{where}: {probe_name} is not a gRPC probe (grpc.health.v1)")
        for h in NON_GRPC_HANDLERS:
            report.check(h not in probe, f"{where}: {probe_name} uses {h}, want grpc")
        if isinstance(grpc, dict):
            port = grpc.get("port")
            report.check(port in (grpc_port, "grpc"), f"{where}: {probe_name} probes port {port}, want {grpc_port}")
            # "" (or absent) = the whole server: SERVING once every model is warm.
            report.check(grpc.get("service", "") == "",
                         f"{where}: {probe_name} checks service {grpc.get('service')!r}; want the server (\"\")")
    startup = c.get("startupProbe") or {}
    budget = startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3)
    report.check(budget >= 120, f"{where}: startupProbe allows {budget} s to load and warm models, want >= 120")

    # Drain: grace period > preStop sleep + --drain_timeout.
    drain_text = flags.get("drain_timeout") or ctx.serve_flags.get("drain_timeout")
    drain = deploylib.parse_duration(drain_text or "")
    report.check(drain is not None, f"{where}: cannot parse --drain_timeout {drain_text!r}")
    pre_stop = (((c.get("lifecycle") or {}).get("preStop") or {}))
    sleep_s = None
    cmd = (pre_stop.get("exec") or {}).get("command") or []
    if len(cmd) == 2 and cmd[0].endswith("sleep"):
        sleep_s = deploylib.parse_duration(cmd[1] if not cmd[1].isdigit() else cmd[1] + "s")
    elif "sleep" in pre_stop:
        sleep_s = float(pre_stop["sleep"].get("seconds", 0))
    report.check(sleep_s is not None and sleep_s >= 5,
                 f"{where}: preStop must sleep >= 5 s (endpoint propagation) before SIGTERM, got {pre_stop}")
    grace = pod.get("terminationGracePeriodSeconds")
    if drain is not None and sleep_s is not None:
        report.check(isinstance(grace, int) and grace > sleep_s + drain,
                     f"{where}: terminationGracePeriodSeconds {grace} must exceed preStop {sleep_s:g} s + "
                     f"--drain_timeout {drain:g} s")

    # GPU or CPU.
    backend = flags.get("backend")
    gpu_limit = str(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", "0"))
    gpu_request = ((c.get("resources") or {}).get("requests") or {}).get("nvidia.com/gpu")
    wants_gpu = name == "gpu" or backend == "cuda"
    if wants_gpu:
        report.check(name != "gpu" or backend == "cuda", f"{where}: the GPU overlay must run --backend=cuda, runs {backend}")
        report.check(gpu_limit.isdigit() and int(gpu_limit) >= 1,
                     f"{where}: GPU pod without an nvidia.com/gpu limit (limits: {gpu_limit})")
        report.check(gpu_request is None or str(gpu_request) == gpu_limit,
                     f"{where}: nvidia.com/gpu request {gpu_request} differs from the limit {gpu_limit}")
        tol = [t for t in pod.get("tolerations") or [] if t.get("key") == "nvidia.com/gpu"]
        report.check(bool(tol), f"{where}: GPU pod without a toleration for the nvidia.com/gpu taint")
    else:
        report.check(backend == "cpu", f"{where}: a CPU overlay must run --backend=cpu, runs {backend}")
        for cc in containers + inits:
            res = cc.get("resources") or {}
            for kind in ("limits", "requests"):
                report.check("nvidia.com/gpu" not in (res.get(kind) or {}),
                             f"{where}: CPU overlay container {cc.get('name')} asks for a GPU")

    # Security: non-root everywhere, matching the image's user.
    report.check(pod_sc.get("runAsNonRoot") is True, f"{where}: pod securityContext.runAsNonRoot is not true")
    report.check(isinstance(pod_sc.get("runAsUser"), int) and pod_sc.get("runAsUser") != 0,
                 f"{where}: pod securityContext.runAsUser must be a non-zero uid")
    report.check(pod_sc.get("fsGroup") is not None, f"{where}: no fsGroup (volumes must be readable by the non-root user)")
    report.check(pod.get("automountServiceAccountToken") is False, f"{where}: the pod mounts a service account token it does not need")
    rankd_cfg = check_image(report, f"{where} container rankd", c, ctx.images)
    if backend == "cuda" and rankd_cfg is not None:
        report.check(image_stage(c.get("image", "")) == "gpu",
                     f"{where}: --backend=cuda on image {c.get('image')!r}; only the gpu image has cuBLASLt")
    for cc in containers + inits:
        cfg = rankd_cfg if cc is c else check_image(report, f"{where} container {cc.get('name')}", cc, ctx.images)
        image_uid = user_uid(cfg["user"]) if cfg else None
        check_container_security(report, f"{where} container {cc.get('name')}", pod_sc, cc, image_uid)
        check_resources(report, f"{where} container {cc.get('name')}", cc)
        image = cc.get("image", "")
        tag = image.rsplit("/", 1)[-1]
        report.check(":" in tag or "@" in image, f"{where} container {cc.get('name')}: image {image!r} has no tag")
        report.check(not tag.endswith(":latest"), f"{where} container {cc.get('name')}: image {image!r} uses :latest")
    for ic in inits:
        iargs = ic.get("args") or []
        report.check(bool(iargs) and iargs[0] == "gen-model",
                     f"{where}: init container {ic.get('name')} runs {iargs[:1]}, expected a rankd gen-model")
        for f in flags_of(iargs[1:]):
            report.check(f in ctx.gen_model_flags, f"{where}: rankd gen-model has no flag --{f}")

    # Rollout never drops below the serving count.
    ru = (dep["spec"].get("strategy") or {}).get("rollingUpdate") or {}
    report.check(ru.get("maxUnavailable") in (0, "0", "0%"), f"{where}: rollingUpdate.maxUnavailable must be 0")
    report.check("replicas" not in dep["spec"], f"{where}: Deployment sets replicas; the HPA owns the count")

    # Volumes: the models volume at --model_root.
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    model_root = flags.get("model_root") or ctx.serve_flags.get("model_root")
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts") or []}
    for cc in containers + inits:
        for m in cc.get("volumeMounts") or []:
            report.check(m["name"] in volumes, f"{where}: {cc.get('name')} mounts unknown volume {m['name']}")
    mm = mounts.get(model_root)
    if report.check(mm is not None, f"{where}: nothing mounted at --model_root {model_root}"):
        report.check(mm.get("readOnly") is True, f"{where}: the models volume is mounted writable in the server")
        vol = volumes.get(mm["name"], {})
        if "persistentVolumeClaim" in vol:
            report.check(bool(vol["persistentVolumeClaim"].get("claimName")), f"{where}: models claim without a name")
        elif "emptyDir" in vol:
            writers = [ic for ic in inits if any(m["name"] == mm["name"] for m in ic.get("volumeMounts") or [])]
            report.check(bool(writers), f"{where}: models emptyDir that no init container fills")
        else:
            report.check(False, f"{where}: models volume is neither a PVC nor an emptyDir filled by an init container: {vol}")
    if "/tmp" in mounts:
        report.check(mounts["/tmp"]["name"] in volumes, f"{where}: /tmp volume missing")

    # Services.
    svc = one(report, docs, "Service", "rankd", where)
    if svc is not None:
        report.check(deploylib.labels_match(svc["spec"].get("selector"), pod_labels),
                     f"{where}: Service rankd selector does not match the pods")
        sports = {p["name"]: p for p in svc["spec"].get("ports") or []}
        report.check({"grpc", "metrics"} <= set(sports), f"{where}: Service rankd needs ports grpc and metrics")
        for p in sports.values():
            report.check(p.get("targetPort") in ports or p.get("targetPort") in ports.values(),
                         f"{where}: Service rankd port {p['name']} targets {p.get('targetPort')}, not a container port")
    headless = [s for s in by_kind(docs, "Service") if s["spec"].get("clusterIP") == "None"]
    if report.check(len(headless) == 1, f"{where}: expected one headless Service, found {len(headless)}"):
        h = headless[0]
        report.check(deploylib.labels_match(h["spec"].get("selector"), pod_labels),
                     f"{where}: headless Service selector does not match the pods")
        hports = {p["name"] for p in h["spec"].get("ports") or []}
        report.check("grpc" in hports, f"{where}: headless Service has no grpc port")
        report.check(not h["spec"].get("publishNotReadyAddresses"), f"{where}: headless Service publishes not-ready pods")

    # ServiceMonitor: exactly one Service with the metrics port, named like the scrape job.
    for sm in by_kind(docs, "ServiceMonitor"):
        sel = (sm["spec"].get("selector") or {}).get("matchLabels")
        endpoints = sm["spec"].get("endpoints") or []
        report.check(bool(endpoints), f"{where}: ServiceMonitor without endpoints")
        for ep in endpoints:
            matches = [s for s in by_kind(docs, "Service")
                       if deploylib.labels_match(sel, s["metadata"].get("labels") or {})
                       and ep.get("port") in {p.get("name") for p in s["spec"].get("ports") or []}]
            report.check(len(matches) == 1,
                         f"{where}: ServiceMonitor endpoint port {ep.get('port')} matches {len(matches)} Services, want 1")
            if matches:
                report.check(matches[0]["metadata"]["name"] in ctx.scrape_jobs,
                             f"{where}: ServiceMonitor scrapes Service {matches[0]['metadata']['name']} (its job label), "
                             f"but the alert rules and prometheus.yml use job(s) {sorted(ctx.scrape_jobs)}")
    report.check(len(by_kind(docs, "ServiceMonitor")) == 1, f"{where}: expected one ServiceMonitor")

    # HPA on the queue-time metric that prometheus-adapter serves.
    hpas = by_kind(docs, "HorizontalPodAutoscaler")
    if report.check(len(hpas) == 1, f"{where}: expected one HorizontalPodAutoscaler, found {len(hpas)}"):
        hpa = hpas[0]
        ref = hpa["spec"].get("scaleTargetRef") or {}
        report.check(ref.get("kind") == "Deployment" and ref.get("name") == dep["metadata"]["name"],
                     f"{where}: HPA scales {ref}, not the rankd Deployment")
        report.check(hpa["spec"].get("minReplicas", 1) >= 2, f"{where}: HPA minReplicas < 2 (a drain would leave no pod)")
        names = [((m.get("pods") or m.get("object") or m.get("external") or {}).get("metric") or {}).get("name")
                 for m in hpa["spec"].get("metrics") or []]
        report.check(bool(names), f"{where}: HPA without metrics")
        for n in names:
            report.check(n in ctx.adapter_metrics,
                         f"{where}: HPA metric {n} is not served by prometheus-adapter's rules {sorted(ctx.adapter_metrics)}")
            report.check(n is not None and "queue" in n, f"{where}: HPA metric {n} is not a queue-time metric")

    # PDB.
    pdbs = by_kind(docs, "PodDisruptionBudget")
    if report.check(len(pdbs) == 1, f"{where}: expected one PodDisruptionBudget, found {len(pdbs)}"):
        spec = pdbs[0]["spec"]
        report.check(deploylib.labels_match((spec.get("selector") or {}).get("matchLabels"), pod_labels),
                     f"{where}: PodDisruptionBudget selector does not match the pods")
        report.check("maxUnavailable" in spec or "minAvailable" in spec, f"{where}: PodDisruptionBudget sets no budget")

    # PrometheusRule = the compose stack's rule file.
    rules = by_kind(docs, "PrometheusRule")
    if report.check(len(rules) == 1, f"{where}: expected one PrometheusRule, found {len(rules)}"):
        report.check(rules[0]["spec"].get("groups") == ctx.alert_groups,
                     f"{where}: PrometheusRule differs from deploy/prometheus/alerts.yml; run "
                     "python3 deploy/tests/k8s_check.py --write-prometheusrule")


def write_prometheusrule(deploy_dir):
    alerts = os.path.join(deploy_dir, "prometheus", "alerts.yml")
    target = os.path.join(deploy_dir, "k8s", "base", "prometheusrule.yaml")
    with open(target) as f:
        head = f.read().split("\nspec:\n", 1)[0] + "\nspec:\n"
    with open(alerts) as f:
        lines = f.read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("groups:"))
    body = "".join(("  " + line if line else line) + "\n" for line in lines[start:])
    with open(target, "w") as f:
        f.write(head + body)
    print(f"wrote {target}")


class Context:
    pass


def make_context(args):
    ctx = Context()
    with open(args.serve_help) as f:
        ctx.serve_flags = deploylib.parse_help_flags(f.read())
    with open(args.gen_model_help) as f:
        ctx.gen_model_flags = deploylib.parse_help_flags(f.read())
    ctx.images = runtime_config(os.path.join(args.deploy, "docker", "Dockerfile"))
    ctx.alert_groups = deploylib.load_yaml(os.path.join(args.deploy, "prometheus", "alerts.yml"))["groups"]
    prom = deploylib.load_yaml(os.path.join(args.deploy, "prometheus", "prometheus.yml"))
    ctx.scrape_jobs = {j["job_name"] for j in prom.get("scrape_configs") or []}
    adapter = deploylib.load_yaml(os.path.join(args.deploy, "k8s", "prometheus-adapter", "values.yaml"))
    ctx.adapter_metrics = {((r.get("name") or {}).get("as")) for r in (adapter.get("rules") or {}).get("custom") or []}
    return ctx


def self_test(ctx, gpu_docs, cpu_docs):
    """Each mutation of a good rendering must make check_overlay fail."""

    def dep(docs):
        return next(d for d in docs if d["kind"] == "Deployment")

    def container(docs):
        return dep(docs)["spec"]["template"]["spec"]["containers"][0]

    def set_flag(docs, flag, value):
        c = container(docs)
        c["args"] = [a for a in c["args"] if not a.startswith(f"--{flag}=")] + [f"--{flag}={value}"]

    mutations = {
        "readiness probe over TCP": lambda d: container(d).update(
            readinessProbe={"tcpSocket": {"port": 8500}, "periodSeconds": 5}),
        "liveness probe over HTTP": lambda d: container(d)["livenessProbe"].update(httpGet={"path": "/", "port": 8502}),
        "no startup probe": lambda d: container(d).pop("startupProbe"),
        "probe on the metrics port": lambda d: container(d)["readinessProbe"]["grpc"].update(port=8502),
        "grace period = drain timeout": lambda d: dep(d)["spec"]["template"]["spec"].update(
            terminationGracePeriodSeconds=30),
        "drain timeout raised past the grace period": lambda d: set_flag(d, "drain_timeout", "2m"),
        "no preStop sleep": lambda d: container(d).pop("lifecycle"),
        "no GPU limit": lambda d: container(d)["resources"]["limits"].pop("nvidia.com/gpu"),
        "GPU overlay on the CPU backend": lambda d: set_flag(d, "backend", "cpu"),
        "root user": lambda d: container(d)["securityContext"].update(runAsUser=0),
        "runAsNonRoot off": lambda d: container(d)["securityContext"].update(runAsNonRoot=False),
        "privilege escalation": lambda d: container(d)["securityContext"].update(allowPrivilegeEscalation=True),
        "unknown flag": lambda d: container(d)["args"].append("--no_such_flag=1"),
        "untagged image": lambda d: container(d).update(image="rankd"),
        "image no Dockerfile stage builds": lambda d: container(d).update(image="rankd:v2"),
        "CPU image under --backend=cuda": lambda d: container(d).update(image="rankd:cpu"),
        "HPA metric nobody serves": lambda d: next(x for x in d if x["kind"] == "HorizontalPodAutoscaler")[
            "spec"]["metrics"][0]["pods"]["metric"].update(name="cpu_seconds"),
        "alert rules drifted": lambda d: next(x for x in d if x["kind"] == "PrometheusRule")["spec"]["groups"][0][
            "rules"].pop(),
        "Service selects nothing": lambda d: next(x for x in d if x["kind"] == "Service" and x["metadata"][
            "name"] == "rankd")["spec"].update(selector={"app": "other"}),
    }
    cpu_mutations = {
        "GPU limit on the CPU overlay": lambda d: container(d)["resources"]["limits"].update({"nvidia.com/gpu": 1}),
    }
    missed = []
    for label, overlay, docs, muts in (("gpu", "gpu", gpu_docs, mutations), ("cpu", "cpu", cpu_docs, cpu_mutations)):
        clean = deploylib.Report("clean")
        check_overlay(clean, overlay, copy.deepcopy(docs), ctx)
        if clean.errors:
            missed.append(f"the unmutated {label} overlay fails: {clean.errors}")
        for what, mutate in muts.items():
            docs2 = copy.deepcopy(docs)
            mutate(docs2)
            r = deploylib.Report(what)
            check_overlay(r, overlay, docs2, ctx)
            if not r.errors:
                missed.append(f"{label}: mutation not caught: {what}")
    for m in missed:
        print(f"FAIL [self-test]: {m}", file=sys.stderr)
    if missed:
        sys.exit(1)
    print(f"self-test: {len(mutations) + len(cpu_mutations)} mutations caught")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rendered", help="directory of OVERLAY.yaml renderings")
    ap.add_argument("--deploy", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--serve_help")
    ap.add_argument("--gen_model_help")
    ap.add_argument("--self_test", action="store_true")
    ap.add_argument("--write-prometheusrule", dest="write_rule", action="store_true")
    args = ap.parse_args()
    if args.write_rule:
        write_prometheusrule(args.deploy)
        return
    ctx = make_context(args)
    report = deploylib.Report("k8s")
    rendered = {}
    for fname in sorted(os.listdir(args.rendered)):
        if fname.endswith(".yaml"):
            rendered[fname[:-5]] = deploylib.load_yaml_all(os.path.join(args.rendered, fname))
    overlays = sorted(n for n in rendered if n != "base")
    report.check({"cpu", "gpu"} <= set(overlays), f"overlays cpu and gpu are required, found {overlays}")
    report.check("base" in rendered, "base was not rendered")
    for name in overlays:
        check_overlay(report, name, rendered[name], ctx)
    report.check({"cpu", "gpu"} <= set(ctx.images), f"deploy/docker/Dockerfile's runtime stages are {sorted(ctx.images)}, want cpu and gpu")
    report.finish()
    if args.self_test:
        self_test(ctx, rendered["gpu"], rendered["cpu"])


if __name__ == "__main__":
    main()
