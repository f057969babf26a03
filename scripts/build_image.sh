#!/usr/bin/env bash
# Builds rankd's runtime image from built binaries with podman (no Docker
# engine, no registry, no toolkit inside a container) and smoke-tests it.
#
#   1. binaries: --bin_dir DIR, or `bazel build --config=cpu //server:rankd
#      //client:rankctl //loadtest:rankload` (--target gpu: --config=portable);
#   2. context: bin/rankd, bin/rankctl, runtime-packages.txt
#      (deploy/docker/runtime_packages.sh on those binaries, here, on the
#      Debian 12 machine that built them), lib/libcublasLt.so.13 (gpu only);
#   3. base image (--base_image, default debian:12-slim): used from podman's
#      storage; when absent, made here: `debootstrap --variant=minbase
#      bookworm`, slimmed like Debian's official slim images, `podman import`,
#      tagged as --base_image. The rootfs tarball is cached in
#      ~/.cache/rankd/images/, so later runs on the machine import it in seconds;
#   4. `podman build --isolation chroot --format docker` of
#      deploy/docker/Dockerfile.prebuilt (docker format: OCI drops HEALTHCHECK),
#      then its per-build labels set again (relabel_image says why);
#   5. smoke test (unless --no_smoke), everything read from the built image's
#      own configuration (`podman image inspect`), not assumed:
#      - the user is uid 10001 (= the Kubernetes runAsUser); the HEALTHCHECK
#        targets the port the image's ENTRYPOINT + CMD serve gRPC on;
#      - the demo model is made in the image by the Kubernetes demo overlay's
#        init container args (`rankd gen-model ...`) into a volume at /models;
#      - the image's ENTRYPOINT + CMD, exactly as they are, serve it; the
#        HEALTHCHECK's command, run inside, answers SERVING; the server runs as
#        the image's user; `rankctl score` inside gives scores identical, byte
#        for byte, to `rankd score` outside on the same model and requests;
#        the STOPSIGNAL drains it (exit 0);
#      - the compose stack's models service (its entrypoint and command) fills
#        an empty volume; the compose rankd command and the rendered Kubernetes
#        overlay's container args (cpu: overlays/demo; gpu: overlays/gpu, which
#        needs a GPU and is skipped without one) serve the model with a
#        read-only root filesystem, a tmpfs /tmp, no capabilities, answer the
#        image's HEALTHCHECK and drain on SIGTERM within their grace periods.
#      Containers run with `podman run` when this machine can (probed with
#      /bin/true: as is, then with the open-files and process limits lowered to
#      what this machine grants, then with the runc runtime); otherwise in the
#      image's root filesystem (a `podman create` + `podman mount` of it) with
#      `chroot --userspec=<the image's USER>` in private mount and network
#      namespaces (unshare: loopback only, /proc, /sys read-only, a minimal
#      /dev, the volumes bind-mounted). Both give each container its own
#      loopback, so the image's ports (8500, 8502) are used as the image says
#      whatever listens on this machine's; nothing but 127.0.0.1 is used.
#
# Usage: scripts/build_image.sh [--bin_dir DIR] [--tag NAME] [--target cpu|gpu]
#          [--base_image NAME] [--no_smoke] [--no_cache] [--runner auto|podman|chroot]
#          [--timeout SECONDS] [--cublaslt FILE]
#   --bin_dir DIR    rankd and rankctl in DIR or DIR/server, DIR/client (bazel-bin)
#   --tag NAME       image name (default rankd:TARGET)
#   --target T       cpu (default) or gpu (CUDA binaries + cuBLASLt)
#   --base_image N   default debian:12-slim (made here when podman has none)
#   --no_smoke       build only
#   --no_cache       rebuild every layer (podman build --no-cache)
#   --runner R       how the smoke test runs containers (default auto: podman
#                    run where it works, else chroot)
#   --timeout S      the whole run, in seconds (default 1800); every step is bounded
#   --cublaslt FILE  gpu: libcublasLt.so.13 (default /usr/local/cuda/lib64/libcublasLt.so.13)
# Environment: DEBIAN_MIRROR (debootstrap's mirror, default http://deb.debian.org/debian).
#
# Output: progress on stderr; on stdout the smoke test's results, the line
#   image: <tag> <size> MB; base <s> s (<origin>), build <s> s, smoke <s> s (<runner>); <s> s in all
# and, last, exactly one of (scripts/test.sh's script_stage reads it)
#   image: PASS
#   image: FAIL <why>
# ("this machine cannot build/run containers: <reason>" when podman cannot).
# Exit status 0 only with PASS. Needs root (podman's storage, debootstrap,
# chroot), podman, debootstrap when a base image must be made (all in
# scripts/setup.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPT="$ROOT/scripts/build_image.sh"
CHROOT_CHILD="$ROOT/scripts/image/chroot_child.sh"
PY=/usr/bin/python3
DOCKERFILE="$ROOT/deploy/docker/Dockerfile.prebuilt"
CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/rankd/images"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

log() { echo "build_image: $*" >&2; }

# ------------------------------------------------------------ options
BIN_DIR=""
TARGET=cpu
TAG=""
BASE_IMAGE=debian:12-slim
SMOKE=1
NO_CACHE=0
RUNNER=auto
TIMEOUT=1800
CUBLASLT=/usr/local/cuda/lib64/libcublasLt.so.13

usage() {
  sed -n '2,/^set -euo/p' "$SCRIPT" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

# usage_error WHY: a bad command line, reported like any other failure.
usage_error() {
  echo "build_image: $* (--help lists the options)" >&2
  echo "image: FAIL bad arguments: $*"
  exit 2
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin_dir) BIN_DIR="${2:?--bin_dir needs a directory}"; shift 2 ;;
    --bin_dir=*) BIN_DIR="${1#*=}"; shift ;;
    --tag) TAG="${2:?--tag needs a name}"; shift 2 ;;
    --tag=*) TAG="${1#*=}"; shift ;;
    --target) TARGET="${2:?--target needs cpu or gpu}"; shift 2 ;;
    --target=*) TARGET="${1#*=}"; shift ;;
    --base_image) BASE_IMAGE="${2:?--base_image needs a name}"; shift 2 ;;
    --base_image=*) BASE_IMAGE="${1#*=}"; shift ;;
    --runner) RUNNER="${2:?--runner needs auto, podman or chroot}"; shift 2 ;;
    --runner=*) RUNNER="${1#*=}"; shift ;;
    --timeout) TIMEOUT="${2:?--timeout needs seconds}"; shift 2 ;;
    --timeout=*) TIMEOUT="${1#*=}"; shift ;;
    --cublaslt) CUBLASLT="${2:?--cublaslt needs a file}"; shift 2 ;;
    --cublaslt=*) CUBLASLT="${1#*=}"; shift ;;
    --no_smoke) SMOKE=0; shift ;;
    --no_cache) NO_CACHE=1; shift ;;
    -h | --help) usage ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
done
[[ "$TARGET" == cpu || "$TARGET" == gpu ]] || usage_error "--target must be cpu or gpu, got '$TARGET'"
[[ "$RUNNER" =~ ^(auto|podman|chroot)$ ]] || usage_error "--runner must be auto, podman or chroot, got '$RUNNER'"
[[ "$TIMEOUT" =~ ^[0-9]+$ && "$TIMEOUT" -gt 0 ]] || usage_error "--timeout must be a positive number of seconds, got '$TIMEOUT'"
TAG="${TAG:-rankd:$TARGET}"

for part in common build containers smoke; do
  # shellcheck source=/dev/null
  source "$ROOT/scripts/image/$part.sh"
done

# ------------------------------------------------------------ main
preflight() {
  command -v podman >/dev/null || fail "this machine cannot build containers: podman is not installed (scripts/setup.sh installs it)"
  [[ "$(id -u)" -eq 0 ]] || fail "this machine cannot build containers here: run as root (podman's system storage, debootstrap, chroot)"
  bounded 60 podman info >/dev/null 2>"$WORK/info.err" ||
    fail "this machine cannot build containers: podman info failed: $(tr '\n' ' ' <"$WORK/info.err")"
  grep -q '^VERSION_ID="12"' /etc/os-release ||
    fail "runtime_packages.sh maps libraries to this machine's Debian packages: build on Debian 12, this is $(. /etc/os-release && echo "$PRETTY_NAME")"
}

main() {
  WORK="$(mktemp -d /var/tmp/rankd-image.XXXXXX)"
  chmod 0755 "$WORK"
  preflight
  VCS_REF=""
  if [[ -z "$BIN_DIR" ]]; then
    build_binaries
    VCS_REF="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || true)"
  fi
  make_context
  local base_start=$SECONDS
  ensure_base_image
  BASE_S=$((SECONDS - base_start))
  build_image
  SIZE_MB=$(($(podman image inspect --format '{{.Size}}' "$TAG") / 1000000))
  log "built $TAG in $BUILD_S s: $SIZE_MB MB (base image: $BASE_IMAGE, $BASE_ORIGIN)"
  SMOKE_S=0
  if [[ "$SMOKE" -eq 1 ]]; then
    smoke_test
    printf '  %s\n' "${PASSED[@]}"
    local skipped=""
    [[ "${#SKIPPED[@]}" -gt 0 ]] && skipped="; ${#SKIPPED[@]} skipped, need a GPU"
    echo "image: $TAG $SIZE_MB MB; base $BASE_S s ($BASE_ORIGIN), build $BUILD_S s, smoke $SMOKE_S s ($RUNNER$skipped); $SECONDS s in all"
  else
    echo "image: $TAG $SIZE_MB MB; base $BASE_S s ($BASE_ORIGIN), build $BUILD_S s, smoke test not run (--no_smoke); $SECONDS s in all"
  fi
  VERDICT="image: PASS"
  echo "$VERDICT"
}

main

