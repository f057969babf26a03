#!/usr/bin/python3
"""Static checks of deploy/docker/Dockerfile, Dockerfile.prebuilt and .dockerignore.

No Docker engine runs here, so this reads the Dockerfile the way the builder
would (continuation lines, comments, ARG defaults, stages) and checks:

  builder  Debian 12 (the distribution scripts/setup.sh installs for); runs
           `bash scripts/setup.sh` and then the exact `bazel build` command of
           scripts/run.sh (so the image builds what CI builds and tests);
           installs nothing itself but the CUDA toolkit;
  runtime  base / cpu / gpu on Debian slim; no compilers or -dev packages;
           binaries copied from the builder's /out; a numeric non-root USER
           created in the image and never switched back; HEALTHCHECK runs
           `rankctl health` (valid flags) against the port rankd serves;
           EXPOSE covers the gRPC and metrics ports; ENTRYPOINT rankd, CMD
           `serve` with flags rankd has; OCI labels; the gpu stage (the
           default target, last) exposes GPUs to the NVIDIA runtime and puts
           cuBLASLt at a path rankd dlopens;
  context  every file the Dockerfile COPYs or runs exists in the repository
           and is not excluded by .dockerignore, nor are the files the Bazel
           build reads; local build output (bazel-*, .git, demo) is excluded.
  prebuilt Dockerfile.prebuilt (the runtime image from binaries built outside
           a container, scripts/build_image.sh) has exactly the runtime stages
           base, cpu, gpu, and each is instruction for instruction the
           Dockerfile's, only the COPY sources differing (its small context's
           bin/, lib/, runtime-packages.txt instead of the builder's /out/):
           same packages, user, HEALTHCHECK, ENTRYPOINT, CMD, labels, ports.

Usage: dockerfile_check.py --root REPO --rankd BIN --serve_help F --health_help F [--self_test]
  --self_test also applies known-bad edits to the Dockerfile text and
  requires each one to be caught.
"""

import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib  # noqa: E402

DOCKERFILE = "deploy/docker/Dockerfile"
PREBUILT = "deploy/docker/Dockerfile.prebuilt"
RUNTIME_STAGES = ["base", "cpu", "gpu"]
# Files the Bazel build of //server:rankd //client:rankctl reads besides sources.
BUILD_INPUTS = [
    "WORKSPACE", ".bazelrc", ".bazelignore", "scripts/setup.sh", "scripts/run.sh", ".ci/run",
    "tools/BUILD", "tools/cuda.bzl", "tools/proto.bzl", "tools/system_libs.bzl",
    "third_party/BUILD", "third_party/rules_cc/cc/defs.bzl", "third_party/rules_cc/WORKSPACE",
    "third_party/remote_coverage_tools/BUILD", "protos/BUILD", "server/BUILD", "server/main.cc",
    "client/BUILD", "engine/BUILD", "kernels/cuda/BUILD", "deploy/docker/runtime_packages.sh",
]
MUST_EXCLUDE = [".git", "bazel-bin", "bazel-out", "bazel-rankd", "demo/models/mini/1/model.pbtxt", ".gpu/bundle"]
BUILDER_ALLOWED_APT = re.compile(r"^(\"?\$\{?\w*\}?)*(ca-certificates|curl|gnupg|\"?cuda-[\w.${}-]+\"?|\"?libcublas[\w.${}-]*\"?)$")
RUNTIME_FORBIDDEN = re.compile(r"(?<![\w.+-])(g\+\+|gcc|clang|bazel(?:-bootstrap)?|nvcc|cuda-nvcc[\w-]*|[\w.+-]+-dev)(?![\w.+-])")


# ---------------------------------------------------------------- parsing
def instructions(text):
    """[(lineno, KEYWORD, args)] with continuations joined and comments dropped."""
    out = []
    buf = ""
    start = None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if re.match(r"^\s*#", line):
            continue  # comment (also inside a continued instruction)
        if not buf and not line.strip():
            continue
        if start is None:
            start = n
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        if buf.strip():
            kw, _, args = buf.strip().partition(" ")
            out.append((start, kw.upper(), args.strip()))
        buf = ""
        start = None
    return out


def substitute(text, env):
    def rep(m):
        name = m.group(1) or m.group(2)
        return env.get(name, m.group(0))
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", rep, text)


class Stage:
    def __init__(self, name, image, lineno):
        self.name = name
        self.image = image
        self.lineno = lineno
        self.instr = []  # (lineno, kw, args)
        self.env = {}

    def runs(self):
        return [(n, a) for n, k, a in self.instr if k == "RUN"]

    def last(self, kw):
        found = [a for n, k, a in self.instr if k == kw]
        return found[-1] if found else None


def parse(text):
    global_args = {}
    stages = []
    for n, kw, args in instructions(text):
        if kw == "FROM":
            parts = args.split()
            parts = [p for p in parts if not p.startswith("--platform")]
            image = substitute(parts[0], global_args)
            name = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else str(len(stages))
            parent = next((s for s in stages if s.name == image), None)
            st = Stage(name, image, n)
            if parent:
                st.instr = [i for i in parent.instr if i[1] not in ("RUN", "COPY", "ADD")]
                st.env = dict(parent.env)
                st.parent = parent
            else:
                st.parent = None
            stages.append(st)
            continue
        if not stages:
            if kw == "ARG":
                k, _, v = args.partition("=")
                global_args[k.strip()] = v.strip().strip('"')
            continue
        st = stages[-1]
        if kw == "ARG":
            k, _, v = args.partition("=")
            if v:
                st.env[k.strip()] = v.strip().strip('"')
            elif k.strip() in global_args:
                st.env[k.strip()] = global_args[k.strip()]
        st.instr.append((n, kw, args))
    return global_args, stages


def exec_form(args):
    """The argv of an exec-form (JSON array) instruction argument, else None."""
    try:
        v = json.loads(args)
    except ValueError:
        return None
    return v if isinstance(v, list) and all(isinstance(x, str) for x in v) else None


def flag_value(argv, name):
    """The value of --NAME=V in ARGV; the last one wins, as in abseil."""
    value = None
    for a in argv:
        f = deploylib.split_flag(a)
        if f and f[0] == name:
            value = f[1]
    return value


def runtime_config(path):
    """{stage name: what a container of that image runs} for the runtime
    stages of the Dockerfile at PATH, for the compose and Kubernetes checks:
    entrypoint and cmd (argv lists), user (the USER string), healthcheck (the
    HEALTHCHECK's argv) and healthcheck_port (the port of its --target)."""
    with open(path) as f:
        _, stages = parse(f.read())
    out = {}
    for st in stages:
        if st.name == "builder":
            continue
        hc = st.last("HEALTHCHECK") or ""
        m = re.search(r"\bCMD\s+(\[.*\])\s*$", hc)
        hc_argv = (exec_form(m.group(1)) if m else None) or []
        target = flag_value(hc_argv, "target") or ""
        out[st.name] = {
            "entrypoint": exec_form(st.last("ENTRYPOINT") or "") or [],
            "cmd": exec_form(st.last("CMD") or "") or [],
            "user": st.last("USER") or "",
            "healthcheck": hc_argv,
            "healthcheck_port": int(target.rsplit(":", 1)[1]) if re.search(r":\d+$", target) else None,
        }
    return out


# ---------------------------------------------------------------- .dockerignore
def _pattern_regex(pattern):
    out = ""
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif c == "*":
            out += "[^/]*"
            i += 1
        elif c == "?":
            out += "[^/]"
            i += 1
        elif c == "[":
            j = pattern.find("]", i)
            out += pattern[i:j + 1] if j > 0 else re.escape(c)
            i = j + 1 if j > 0 else i + 1
        else:
            out += re.escape(c)
            i += 1
    return re.compile("^" + out + "$")


def dockerignore_rules(text):
    rules = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        p = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
        rules.append((neg, _pattern_regex(p)))
    return rules


def ignored(rules, path):
    """Docker's rule: the last pattern matching the path or one of its parents wins."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    result = False
    for neg, rx in rules:
        if any(rx.match(p) for p in prefixes):
            result = not neg
    return result


# ---------------------------------------------------------------- checks
def check(report, text, ctx):
    global_args, stages = parse(text)
    names = [s.name for s in stages]
    by = {s.name: s for s in stages}
    for required in ("builder", "base", "cpu", "gpu"):
        report.check(required in by, f"no stage {required!r} (stages: {names})")
    report.check(bool(stages) and stages[-1].name == "gpu", f"the default (last) stage must be gpu, is {names[-1:]}")
    if not all(r in by for r in ("builder", "base", "cpu", "gpu")):
        return
    b = by["builder"]

    # Builder: Debian 12, setup.sh, then the exact build command of scripts/run.sh.
    report.check(re.match(r"^(docker\.io/(library/)?)?debian:(12|bookworm)\b", b.image) and "slim" not in b.image,
                 f"builder is FROM {b.image}, want Debian 12 (what scripts/setup.sh installs for)")
    # The only option the image may add to run.sh's command: the device-code
    # architectures (--config=portable, tools/cuda.bzl), which change no source.
    portable = "${BAZEL_CONFIG:+--config=${BAZEL_CONFIG}} "
    runs = [(n, a.replace(portable, "")) for n, a in b.runs()]
    setup = [n for n, a in runs if re.search(r"(^|[;&|]\s*)bash scripts/setup\.sh(\s|$)", a)]
    report.check(bool(setup), "the builder never runs `bash scripts/setup.sh`")
    build = [n for n, a in runs if ctx.build_cmd in a]
    report.check(bool(build), f"the builder never runs scripts/run.sh's build command `{ctx.build_cmd}`")
    if setup and build:
        report.check(min(setup) < min(build), "the builder builds before running scripts/setup.sh")
    other_bazel = [(n, m) for n, a in runs for m in re.findall(r"bazel (?:build|test|run)\b[^&;|]*", a)
                   if ctx.build_cmd not in m]
    report.check(not other_bazel, f"the builder runs Bazel commands other than scripts/run.sh's: {other_bazel}")
    copies = [(n, a) for n, k, a in b.instr if k == "COPY"]
    whole = [n for n, a in copies if re.match(r"^(--\S+\s+)*\.\s+\.?/?\S*$", a)]
    report.check(bool(whole) and (not build or min(whole) < min(build)),
                 "the builder must COPY the whole context (`COPY . .`) before building")
    for n, a in runs:
        for m in re.finditer(r"apt-get install ([^&;|]*)", a):
            pkgs = [p for p in m.group(1).split() if not p.startswith("-")]
            for p in pkgs:
                report.check(BUILDER_ALLOWED_APT.match(p) is not None,
                             f"line {n}: the builder installs {p} itself; build dependencies belong in scripts/setup.sh")
        for m in re.finditer(r"\bbash\s+([\w./-]+)", a):
            report.check(os.path.isfile(os.path.join(ctx.root, m.group(1))), f"line {n}: runs {m.group(1)}, not in the repository")
    ci = [a for n, a in runs if ".ci/run" in a]
    report.check(bool(ci), "the builder has no optional CI step (.ci/run)")
    report.check(any("runtime_packages.sh" in a and "/out/bin/rankd" in a for _, a in runs),
                 "the builder does not derive the runtime packages from the built binaries")

    # COPY sources from the context exist and are not ignored.
    for s in stages:
        for n, k, a in s.instr:
            if k not in ("COPY", "ADD") or "--from=" in a:
                continue
            argv = [x for x in a.split() if not x.startswith("--")]
            for src in argv[:-1]:
                if src == ".":
                    continue
                report.check(os.path.exists(os.path.join(ctx.root, src)), f"line {n}: COPY {src}: not in the repository")
                report.check(not ignored(ctx.ignore, src), f"line {n}: COPY {src} is excluded by .dockerignore")

    # Runtime stages.
    base = by["base"]
    report.check(re.match(r"^(docker\.io/(library/)?)?debian:(12|bookworm)-slim$", base.image) is not None,
                 f"base is FROM {base.image}, want debian:12-slim")
    for st in (by["cpu"], by["gpu"]):
        report.check(st.parent is base, f"stage {st.name} does not build on base")
    for st in (base, by["cpu"], by["gpu"]):
        for n, k, a in st.instr:
            if k == "RUN":
                for m in re.finditer(r"apt-get install ([^&;|]*)", a):
                    bad = RUNTIME_FORBIDDEN.findall(m.group(1))
                    report.check(not bad, f"line {n}: runtime stage {st.name} installs build tools {bad}")
                report.check("bazel" not in a, f"line {n}: runtime stage {st.name} runs bazel")
            if k == "COPY" and "--from=" in a:
                src = [x for x in a.split() if not x.startswith("--")][:-1]
                for x in src:
                    report.check(x.startswith("/out/") or x.endswith("libcublasLt.so.13"),
                                 f"line {n}: {st.name} copies {x} from the builder (only /out/ and cuBLASLt)")
    report.check(any("runtime-packages.txt" in a and "apt-get install" in a for _, a in base.runs()),
                 "base does not install the runtime package list derived in the builder")
    report.check(any(k == "COPY" and "/out/bin/rankd" in a and "/out/bin/rankctl" in a for _, k, a in base.instr),
                 "base does not copy rankd and rankctl from the builder")

    # User: numeric, non-root, created in base, kept by cpu and gpu.
    useradd = [a for _, a in base.runs() if "useradd" in a]
    uid_made = re.search(r"useradd[^&;|]*--uid[ =](\d+)", useradd[0]).group(1) if useradd and re.search(
        r"useradd[^&;|]*--uid[ =](\d+)", useradd[0]) else None
    report.check(uid_made is not None, "base creates no user with a fixed --uid")
    for st in (by["cpu"], by["gpu"]):
        user = st.last("USER")
        report.check(user is not None, f"stage {st.name} has no USER (runs as root)")
        if user:
            uid = user.split(":")[0]
            report.check(uid.isdigit() and int(uid) != 0,
                         f"stage {st.name}: USER {user} must be a numeric non-root uid (Kubernetes runAsNonRoot needs a number)")
            report.check(uid == uid_made, f"stage {st.name}: USER {uid} is not the user base creates ({uid_made})")

    # Ports, entrypoint, commands.
    ep = exec_form(base.last("ENTRYPOINT") or "")
    report.check(ep == ["rankd"], f"ENTRYPOINT is {base.last('ENTRYPOINT')}, want [\"rankd\"]")
    expose = set()
    for a in [a for _, k, a in base.instr if k == "EXPOSE"]:
        expose |= {int(p.split("/")[0]) for p in a.split()}
    for st, backends in ((base, None), (by["cpu"], {"cpu"}), (by["gpu"], {"auto", "cuda"})):
        cmd = exec_form(st.last("CMD") or "")
        if not report.check(cmd and cmd[0] == "serve", f"stage {st.name}: CMD must be exec form starting with serve, is {cmd}"):
            continue
        for a in cmd[1:]:
            f = deploylib.split_flag(a)
            report.check(f is not None and f[0] in ctx.serve_flags, f"stage {st.name}: rankd serve has no flag {a}")
        grpc_port = int(flag_value(cmd, "grpc_port") or ctx.serve_flags["grpc_port"])
        metrics_port = int(flag_value(cmd, "metrics_port") or ctx.serve_flags["metrics_port"])
        report.check({grpc_port, metrics_port} <= expose, f"stage {st.name}: EXPOSE {sorted(expose)} misses {grpc_port}/{metrics_port}")
        report.check((flag_value(cmd, "model_root") or "") == "/models", f"stage {st.name}: serve --model_root is not /models")
        if backends:
            report.check(flag_value(cmd, "backend") in backends,
                         f"stage {st.name}: --backend={flag_value(cmd, 'backend')}, want one of {sorted(backends)}")
        # HEALTHCHECK: rankctl health against that port.
        hc = st.last("HEALTHCHECK") or ""
        m = re.search(r"\bCMD\s+(\[.*\])\s*$", hc)
        argv = exec_form(m.group(1)) if m else None
        if report.check(argv is not None and argv[:2] == ["rankctl", "health"],
                        f"stage {st.name}: HEALTHCHECK must run [\"rankctl\", \"health\", ...], is {hc!r}"):
            for a in argv[2:]:
                f = deploylib.split_flag(a)
                report.check(f is not None and f[0] in ctx.health_flags, f"HEALTHCHECK: rankctl health has no flag {a}")
            target = flag_value(argv, "target") or ctx.health_flags.get("target", "")
            report.check(target.rsplit(":", 1)[-1] == str(grpc_port),
                         f"stage {st.name}: HEALTHCHECK checks {target}, rankd serves gRPC on {grpc_port}")
            report.check(flag_value(argv, "service") in (None, ""), "HEALTHCHECK must check the whole server (service \"\")")
        for opt in ("--interval", "--timeout", "--start-period", "--retries"):
            report.check(opt in hc, f"HEALTHCHECK sets no {opt}")
    stop = base.last("STOPSIGNAL")
    report.check(stop in (None, "SIGTERM", "15"), f"STOPSIGNAL {stop}: rankd drains on SIGTERM")

    # OCI labels. Their per-build arguments come after the last RUN: an
    # argument in scope joins every later RUN's cache key, and a new
    # BUILD_DATE would reinstall the packages on every build.
    last_run = max((n for n, k, _ in base.instr if k == "RUN"), default=0)
    for n, k, a in base.instr:
        if k == "ARG" and a.split("=")[0] in ("BUILD_DATE", "VCS_REF") and n < last_run:
            report.fail(f"line {n}: ARG {a.split('=')[0]} before base's RUN (line {last_run}) makes every build reinstall the packages")
    labels = " ".join(a for _, k, a in base.instr if k == "LABEL")
    for key in ("title", "description", "version", "revision", "created", "source"):
        report.check(f"org.opencontainers.image.{key}=" in labels, f"no OCI label org.opencontainers.image.{key}")

    # GPU stage.
    gpu = by["gpu"]
    env = " ".join(a for _, k, a in gpu.instr if k == "ENV")
    report.check("NVIDIA_VISIBLE_DEVICES=" in env, "gpu stage sets no NVIDIA_VISIBLE_DEVICES")
    m = re.search(r"NVIDIA_DRIVER_CAPABILITIES=(\S+)", env)
    report.check(m is not None and "compute" in m.group(1), "gpu stage: NVIDIA_DRIVER_CAPABILITIES must include compute")
    cublas = [a for _, k, a in gpu.instr if k == "COPY" and "libcublasLt.so.13" in a]
    if report.check(bool(cublas), "gpu stage does not install cuBLASLt (libcublasLt.so.13), which rankd dlopens"):
        dest = cublas[0].split()[-1]
        report.check(dest in ctx.rankd_strings,
                     f"gpu stage puts cuBLASLt at {dest}, a path rankd does not dlopen (not in the binary's strings)")
    report.check("libcublasLt" not in " ".join(a for _, k, a in by["cpu"].instr if k == "COPY"),
                 "the cpu image carries cuBLASLt")

    # .dockerignore.
    for p in BUILD_INPUTS:
        report.check(not ignored(ctx.ignore, p), f".dockerignore excludes {p}, which the build needs")
    for p in MUST_EXCLUDE:
        report.check(ignored(ctx.ignore, p), f".dockerignore does not exclude {p}")


def normalized(kw, args):
    """An instruction with COPY sources reduced to file names (the builder's
    /out/bin/rankd and the context's bin/rankd are both "rankd") and --from
    dropped; whitespace collapsed."""
    words = args.split()
    if kw in ("COPY", "ADD"):
        opts = [w for w in words if w.startswith("--") and not w.startswith("--from=")]
        paths = [w for w in words if not w.startswith("--")]
        words = opts + [os.path.basename(p.rstrip("/")) for p in paths[:-1]] + paths[-1:]
    return kw + " " + " ".join(words)


def check_prebuilt(report, text, prebuilt_text):
    """Dockerfile.prebuilt = the Dockerfile's runtime stages, sources aside."""
    full_args, full = parse(text)
    pre_args, pre = parse(prebuilt_text)
    names = [s.name for s in pre]
    if not report.check(names == RUNTIME_STAGES,
                        f"{PREBUILT}: stages {names}, want exactly {RUNTIME_STAGES} (runtime only, gpu the default)"):
        return
    report.check(pre_args.get("DEBIAN_SLIM_IMAGE") == full_args.get("DEBIAN_SLIM_IMAGE"),
                 f"{PREBUILT}: DEBIAN_SLIM_IMAGE defaults to {pre_args.get('DEBIAN_SLIM_IMAGE')!r}, "
                 f"the Dockerfile to {full_args.get('DEBIAN_SLIM_IMAGE')!r}")
    by = {s.name: s for s in full}
    for st in pre:
        ref = by.get(st.name)
        if ref is None:
            continue  # check() reports the Dockerfile's missing stage
        report.check(st.image == ref.image, f"{PREBUILT}: stage {st.name} is FROM {st.image}, the Dockerfile's FROM {ref.image}")
        a = [(n, normalized(k, x)) for n, k, x in st.instr]
        b = [(n, normalized(k, x)) for n, k, x in ref.instr]
        for (na, ia), (nb, ib) in zip(a, b):
            if ia != ib:
                report.fail(f"{PREBUILT} line {na} differs from {DOCKERFILE} line {nb} (stage {st.name}):\n"
                            f"    prebuilt:   {ia}\n    Dockerfile: {ib}")
                break
        else:
            report.check(len(a) == len(b), f"{PREBUILT}: stage {st.name} has {len(a)} instructions, the Dockerfile's {len(b)}")
        for n, k, x in st.instr:
            if k in ("COPY", "ADD"):
                report.check("--from=" not in x, f"{PREBUILT} line {n}: copies from a stage; everything comes from the context")
                for src in [w for w in x.split() if not w.startswith("--")][:-1]:
                    report.check(re.match(r"^(bin/|lib/|runtime-packages\.txt$)", src) is not None,
                                 f"{PREBUILT} line {n}: {src} is not in the context scripts/build_image.sh makes "
                                 "(bin/, lib/, runtime-packages.txt)")


def check_all(report, text, prebuilt_text, ctx):
    check(report, text, ctx)
    check_prebuilt(report, text, prebuilt_text)


class Ctx:
    pass


def binary_strings(path, min_len=8):
    with open(path, "rb") as f:
        data = f.read()
    return {s.decode() for s in re.findall(rb"[\x20-\x7e]{%d,}" % min_len, data)}


def self_test(text, prebuilt_text, ctx):
    edits = {
        "setup.sh not run": ("RUN bash scripts/setup.sh", "RUN true"),
        "another bazel command": ("RUN bazel build ${BAZEL_CONFIG:+--config=${BAZEL_CONFIG}} //server:rankd //client:rankctl",
                                  "RUN bazel build ${BAZEL_CONFIG:+--config=${BAZEL_CONFIG}} //server:rankd"),
        "build deps installed by the Dockerfile": ('"cuda-cccl-${CUDA_PKG_VERSION}"', '"cuda-cccl-${CUDA_PKG_VERSION}" libgrpc++-dev'),
        "builder on Ubuntu": ("FROM ${DEBIAN_IMAGE} AS builder", "FROM ubuntu:24.04 AS builder"),
        "root user": ("USER 10001:10001", "USER root"),
        "healthcheck without rankctl": ('CMD ["rankctl", "health", ', 'CMD ["curl", "health", '),
        "healthcheck on the wrong port": ("--target=127.0.0.1:8500", "--target=127.0.0.1:8502"),
        "unknown serve flag": ('"--backend=cpu"]', '"--backend=cpu", "--no_such_flag"]'),
        "OCI label missing": ('org.opencontainers.image.source=', 'org.example.source='),
        "compiler in the runtime": ("apt-get install -y -qq --no-install-recommends \\\n && rm",
                                    "apt-get install -y -qq --no-install-recommends g++ \\\n && rm"),
        "cpu image on the gpu default": ("FROM base AS gpu", "FROM base AS gpu0"),
        "cuBLASLt where rankd does not look": ("libcublasLt.so.13 /usr/local/cuda/lib64/libcublasLt.so.13",
                                               "libcublasLt.so.13 /opt/libcublasLt.so.13"),
        "build date in the packages' cache key": ("FROM ${DEBIAN_SLIM_IMAGE} AS base\n",
                                                  "FROM ${DEBIAN_SLIM_IMAGE} AS base\nARG BUILD_DATE=unknown\n"),
    }
    # Edits of Dockerfile.prebuilt alone: each makes it disagree with the Dockerfile.
    prebuilt_edits = {
        "prebuilt: root user": ("USER 10001:10001", "USER root"),
        "prebuilt: healthcheck on another port": ("--target=127.0.0.1:8500", "--target=127.0.0.1:8502"),
        "prebuilt: another backend": ('"--backend=cpu"]', '"--backend=auto"]'),
        "prebuilt: label missing": ("org.opencontainers.image.source=", "org.example.source="),
        "prebuilt: another entrypoint": ('ENTRYPOINT ["rankd"]', 'ENTRYPOINT ["/usr/local/bin/rankd"]'),
        "prebuilt: a package more": ("--no-install-recommends \\\n", "--no-install-recommends curl \\\n"),
        "prebuilt: binaries from a stage": ("COPY bin/rankd bin/rankctl", "COPY --from=builder /out/bin/rankd /out/bin/rankctl"),
        "prebuilt: a builder stage": ("FROM ${DEBIAN_SLIM_IMAGE} AS base", "FROM debian:12 AS builder\nRUN true\nFROM ${DEBIAN_SLIM_IMAGE} AS base"),
        "prebuilt: cuBLASLt elsewhere": ("lib/libcublasLt.so.13 /usr/local/cuda/lib64/", "lib/libcublasLt.so.13 /opt/"),
    }
    missed = []
    clean = deploylib.Report("clean")
    check_all(clean, text, prebuilt_text, ctx)
    if clean.errors:
        missed.append(f"the unmodified Dockerfiles fail: {clean.errors}")
    for what, (old, new) in edits.items():
        if old not in text:
            missed.append(f"self-test edit {what!r}: text {old!r} not found in the Dockerfile")
            continue
        r = deploylib.Report(what)
        check_all(r, text.replace(old, new, 1), prebuilt_text, ctx)
        if not r.errors:
            missed.append(f"edit not caught: {what}")
    for what, (old, new) in prebuilt_edits.items():
        if old not in prebuilt_text:
            missed.append(f"self-test edit {what!r}: text {old!r} not found in {PREBUILT}")
            continue
        r = deploylib.Report(what)
        check_all(r, text, prebuilt_text.replace(old, new, 1), ctx)
        if not r.errors:
            missed.append(f"edit not caught: {what}")
    r = deploylib.Report("dockerignore")
    saved = ctx.ignore
    ctx.ignore = dockerignore_rules("*\n!deploy\n")
    check_all(r, text, prebuilt_text, ctx)
    ctx.ignore = saved
    if not any("excludes" in e for e in r.errors):
        missed.append("edit not caught: .dockerignore excluding the sources")
    for m in missed:
        print(f"FAIL [self-test]: {m}", file=sys.stderr)
    if missed:
        sys.exit(1)
    print(f"self-test: {len(edits) + len(prebuilt_edits) + 1} bad edits caught")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", required=True)
    ap.add_argument("--rankd", required=True)
    ap.add_argument("--serve_help", required=True)
    ap.add_argument("--health_help", required=True)
    ap.add_argument("--self_test", action="store_true")
    args = ap.parse_args()
    ctx = Ctx()
    ctx.root = args.root
    with open(args.serve_help) as f:
        ctx.serve_flags = deploylib.parse_help_flags(f.read())
    with open(args.health_help) as f:
        ctx.health_flags = deploylib.parse_help_flags(f.read())
    ctx.rankd_strings = binary_strings(args.rankd)
    with open(os.path.join(args.root, ".dockerignore")) as f:
        ctx.ignore = dockerignore_rules(f.read())
    with open(os.path.join(args.root, "scripts", "run.sh")) as f:
        cmds = [line.strip() for line in f if re.match(r"^\s*bazel build ", line)]
    report = deploylib.Report("dockerfile")
    report.check(len(cmds) == 1, f"scripts/run.sh has {len(cmds)} `bazel build` lines, want exactly 1")
    ctx.build_cmd = cmds[0] if cmds else "<none>"
    with open(os.path.join(args.root, DOCKERFILE)) as f:
        text = f.read()
    with open(os.path.join(args.root, PREBUILT)) as f:
        prebuilt_text = f.read()
    check_all(report, text, prebuilt_text, ctx)
    report.finish()
    if args.self_test:
        self_test(text, prebuilt_text, ctx)


if __name__ == "__main__":
    main()
