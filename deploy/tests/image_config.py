#!/usr/bin/python3
"""What scripts/build_image.sh's smoke test runs, read from the real sources.

Each subcommand prints bash assignments (values quoted with shlex.quote, arrays
as NAME=(...)) for the script to `eval`, so nothing about the image, the
compose stack or the Kubernetes manifests is assumed by the script itself:

  image INSPECT_JSON SERVE_HELP
      the built image's own configuration (`podman image inspect`, docker
      format): IMG_USER, IMG_ENTRYPOINT, IMG_CMD, IMG_ENV, IMG_WORKDIR,
      IMG_STOPSIGNAL, IMG_SIZE, IMG_HC (the HEALTHCHECK's command; CMD-SHELL as
      /bin/sh -c), IMG_HC_TIMEOUT_S, IMG_HC_START_S, IMG_HC_TARGET, IMG_HC_PORT,
      IMG_GRPC_PORT (the --grpc_port the entrypoint + CMD serve on; rankd's
      default when the CMD sets none).
  compose SERVE_HELP FILE [OVERRIDE...]
      the compose stack (files merged like `docker compose -f A -f B`):
      COMPOSE_RANKD_ENTRYPOINT / COMPOSE_RANKD_CMD (empty = the image's),
      COMPOSE_RANKD_GRPC_PORT, COMPOSE_RANKD_READ_ONLY, COMPOSE_RANKD_TMPFS,
      COMPOSE_RANKD_GRACE_S (stop_grace_period), COMPOSE_MODELS_ENTRYPOINT /
      COMPOSE_MODELS_CMD (the demo-model generator, `$$` unescaped as compose
      does), COMPOSE_MODELS_TARGET (its model volume's mount point).
  k8s SERVE_HELP RENDERED_YAML
      the rankd Deployment of one rendered overlay (`kubectl kustomize`):
      K8S_COMMAND / K8S_ARGS of the rankd container, K8S_GRPC_PORT, K8S_UID,
      K8S_READ_ONLY, K8S_GRACE_S, K8S_PRESTOP_S, K8S_INIT_ARGS (the first init
      container's args, empty without one), K8S_BACKEND.

Docker's rules decide what runs: a command (compose `command`, Kubernetes
`args`) replaces the image's CMD; an entrypoint (compose `entrypoint`,
Kubernetes `command`) replaces ENTRYPOINT and drops the image's CMD.
"""

import json
import os
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib  # noqa: E402
from config_check import merge, volume_parts  # noqa: E402  (compose's override merge, volume syntax)


def emit(name, value):
    if isinstance(value, (list, tuple)):
        print(f"{name}=({' '.join(shlex.quote(str(v)) for v in value)})")
    else:
        print(f"{name}={shlex.quote('' if value is None else str(value))}")


def flag(argv, name):
    """The value of --NAME in ARGV ('--name=v' or '--name v'; the last one
    wins, as in abseil's flag parsing); None if absent."""
    value = None
    for i, a in enumerate(argv):
        f = deploylib.split_flag(a)
        if f and f[0] == name:
            value = f[1] if f[1] is not None else (argv[i + 1] if i + 1 < len(argv) else None)
    return value


def serve_defaults(path):
    with open(path) as f:
        return deploylib.parse_help_flags(f.read())


def grpc_port(argv, defaults):
    """--grpc_port of a `rankd serve ...` argv (rankd's default if unset); '' if not serve."""
    if "serve" not in argv:
        return ""
    return flag(argv, "grpc_port") or defaults.get("grpc_port") or ""


def seconds(nanos):
    return int(nanos or 0) // 1_000_000_000


def image(inspect_path, serve_help):
    with open(inspect_path) as f:
        data = json.load(f)
    img = data[0] if isinstance(data, list) else data
    cfg = img.get("Config") or {}
    entrypoint = cfg.get("Entrypoint") or []
    cmd = cfg.get("Cmd") or []
    # podman reports the docker-format HEALTHCHECK at the top level
    # ("Healthcheck"), docker inside Config.
    hc = img.get("Healthcheck") or cfg.get("Healthcheck") or {}
    test = hc.get("Test") or []
    if test[:1] == ["CMD"]:
        hc_argv = test[1:]
    elif test[:1] == ["CMD-SHELL"]:
        hc_argv = ["/bin/sh", "-c", " ".join(test[1:])]
    else:  # [], ["NONE"]: no health check
        hc_argv = []
    target = flag(hc_argv, "target") or ""
    emit("IMG_USER", cfg.get("User") or "")
    emit("IMG_ENTRYPOINT", entrypoint)
    emit("IMG_CMD", cmd)
    emit("IMG_ENV", cfg.get("Env") or [])
    emit("IMG_WORKDIR", cfg.get("WorkingDir") or "")
    emit("IMG_STOPSIGNAL", cfg.get("StopSignal") or "SIGTERM")
    emit("IMG_SIZE", img.get("Size") or 0)
    emit("IMG_HC", hc_argv)
    emit("IMG_HC_TIMEOUT_S", seconds(hc.get("Timeout")) or 30)
    emit("IMG_HC_START_S", seconds(hc.get("StartPeriod")))
    emit("IMG_HC_TARGET", target)
    emit("IMG_HC_PORT", target.rsplit(":", 1)[-1] if ":" in target else "")
    emit("IMG_GRPC_PORT", grpc_port(entrypoint + cmd, serve_defaults(serve_help)))


def compose(serve_help, files):
    doc = {}
    for path in files:
        doc = merge(doc, deploylib.load_yaml(path))
    services = doc.get("services") or {}
    rankd = services.get("rankd") or {}
    models = services.get("models") or {}
    defaults = serve_defaults(serve_help)
    r_ep, r_cmd = rankd.get("entrypoint") or [], rankd.get("command") or []
    emit("COMPOSE_RANKD_ENTRYPOINT", r_ep)
    emit("COMPOSE_RANKD_CMD", r_cmd)
    emit("COMPOSE_RANKD_GRPC_PORT", grpc_port((r_ep or ["rankd"]) + r_cmd, defaults))
    emit("COMPOSE_RANKD_READ_ONLY", 1 if rankd.get("read_only") else 0)
    emit("COMPOSE_RANKD_TMPFS", rankd.get("tmpfs") or [])
    grace = deploylib.parse_duration(str(rankd.get("stop_grace_period", "10s")))
    emit("COMPOSE_RANKD_GRACE_S", int(grace) if grace is not None else 10)
    # Compose interpolates ${VAR} and turns $$ into a literal $.
    unescape = [a.replace("$$", "$") for a in models.get("command") or []]
    emit("COMPOSE_MODELS_ENTRYPOINT", models.get("entrypoint") or [])
    emit("COMPOSE_MODELS_CMD", unescape)
    targets = [volume_parts(v)[1] for v in models.get("volumes") or []]
    emit("COMPOSE_MODELS_TARGET", targets[0] if targets else "")


def k8s(serve_help, rendered):
    docs = deploylib.load_yaml_all(rendered)
    dep = next((d for d in docs if d.get("kind") == "Deployment"), None)
    if dep is None:
        sys.exit(f"image_config: no Deployment in {rendered}")
    pod = dep["spec"]["template"]["spec"]
    c = next((c for c in pod.get("containers") or [] if c.get("name") == "rankd"), None)
    if c is None:
        sys.exit(f"image_config: no container named rankd in {rendered}")
    command, args = c.get("command") or [], c.get("args") or []
    sc = {**(pod.get("securityContext") or {}), **(c.get("securityContext") or {})}
    pre_stop = (((c.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}).get("command") or []
    sleep_s = pre_stop[1] if len(pre_stop) == 2 and pre_stop[0].endswith("sleep") else "0"
    inits = pod.get("initContainers") or []
    emit("K8S_COMMAND", command)
    emit("K8S_ARGS", args)
    emit("K8S_GRPC_PORT", grpc_port((command or ["rankd"]) + args, serve_defaults(serve_help)))
    emit("K8S_UID", sc.get("runAsUser", ""))
    emit("K8S_READ_ONLY", 1 if sc.get("readOnlyRootFilesystem") else 0)
    emit("K8S_GRACE_S", pod.get("terminationGracePeriodSeconds", 30))
    emit("K8S_PRESTOP_S", sleep_s)
    emit("K8S_INIT_ARGS", (inits[0].get("args") or []) if inits else [])
    emit("K8S_BACKEND", flag(args, "backend") or "")


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("image", "compose", "k8s"):
        sys.exit(__doc__)
    what, rest = sys.argv[1], sys.argv[2:]
    if what == "image" and len(rest) == 2:
        image(*rest)
    elif what == "compose" and len(rest) >= 2:
        compose(rest[0], rest[1:])
    elif what == "k8s" and len(rest) == 2:
        k8s(*rest)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
