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
PY=/usr/bin/python3
DOCKERFILE="$ROOT/deploy/docker/Dockerfile.prebuilt"
CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/rankd/images"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

log() { echo "build_image: $*" >&2; }

# ------------------------------------------------------------ chroot child
# `build_image.sh __chroot_child ...` is not for users: the chroot runner
# re-enters the script through unshare(1) to set up one "container" in its
# new mount and network namespaces, then execs the command in the chroot.
#   __chroot_child ROOTFS READ_ONLY USERSPEC WORKDIR NVOL VOL... NENV ENV... ARGV...
# VOL is HOST:TARGET[:ro]. Mounts made here live and die with the namespace.
chroot_child() {
  local rootfs="$1" read_only="$2" userspec="$3" workdir="$4" n i spec host target mode
  shift 4
  n="$1"
  shift
  local vols=("${@:1:n}")
  shift "$n"
  n="$1"
  shift
  local envs=("${@:1:n}")
  shift "$n"
  ip link set lo up
  mount -t proc proc "$rootfs/proc"
  mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$rootfs/sys"
  # A minimal /dev, as container runtimes give: the usual character devices
  # bound from this machine, the standard links, a private /dev/shm.
  mount -t tmpfs -o nosuid,mode=755,size=64k tmpfs "$rootfs/dev"
  for d in null zero full random urandom tty; do
    touch "$rootfs/dev/$d"
    mount --bind "/dev/$d" "$rootfs/dev/$d"
  done
  ln -s /proc/self/fd "$rootfs/dev/fd"
  ln -s /proc/self/fd/0 "$rootfs/dev/stdin"
  ln -s /proc/self/fd/1 "$rootfs/dev/stdout"
  ln -s /proc/self/fd/2 "$rootfs/dev/stderr"
  mkdir "$rootfs/dev/shm"
  mount -t tmpfs -o nosuid,nodev,mode=1777,size=64m tmpfs "$rootfs/dev/shm"
  for spec in "${vols[@]}"; do
    IFS=: read -r host target mode <<<"$spec"
    mkdir -p "$rootfs$target"
    mount --bind "$host" "$rootfs$target"
    [[ "$mode" == ro ]] && mount -o remount,bind,ro "$rootfs$target"
  done
  if [[ "$read_only" == 1 ]]; then
    # readOnlyRootFilesystem / compose read_only, with a writable /tmp.
    mount -t tmpfs -o nosuid,nodev,mode=1777,size=64m tmpfs "$rootfs/tmp"
    mount -o remount,bind,ro "$rootfs"
  fi
  local cd=()
  [[ -n "$workdir" && "$workdir" != / ]] && cd=(env --chdir="$workdir" --)
  exec env -i "${envs[@]}" chroot --userspec="$userspec" "$rootfs" "${cd[@]}" "$@"
}
if [[ "${1:-}" == __chroot_child ]]; then
  shift
  chroot_child "$@"
fi

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

# ------------------------------------------------------------ verdict, cleanup
WORK=""
VERDICT=""
RUN_ID="rankd-smoke-$$"
SERVER_PIDS=()      # chroot runner: the servers' unshare processes
PODMAN_CTRS=()      # podman runner: containers this run created
ROOTFS_CTR=""       # chroot runner: the container whose rootfs is mounted

# fail WHY: the verdict line, then exit 1 (the EXIT trap cleans up).
fail() {
  VERDICT="image: FAIL $*"
  echo "$VERDICT"
  exit 1
}

cleanup() {
  local pid c
  for pid in "${SERVER_PIDS[@]}"; do
    kill_tree "$pid"
  done
  for c in "${PODMAN_CTRS[@]}"; do
    podman rm -f -t 0 "$c" >/dev/null 2>&1 || true
  done
  if [[ -n "$ROOTFS_CTR" ]]; then
    podman umount "$ROOTFS_CTR" >/dev/null 2>&1 || true
    podman rm -f "$ROOTFS_CTR" >/dev/null 2>&1 || true
  fi
  [[ -n "$WORK" && -d "$WORK" ]] && rm -rf "$WORK"
  # set -e ended the run before a verdict: say so, as FAIL.
  [[ -n "$VERDICT" ]] || echo "image: FAIL unexpected error (see the messages above)"
}
trap cleanup EXIT
trap 'fail "interrupted by a signal"' INT TERM

# kill_tree PID: PID (an unshare of the chroot runner) and its children, by id.
kill_tree() {
  local pid="$1" child
  for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do
    kill -KILL "$child" 2>/dev/null || true
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# ------------------------------------------------------------ time bounds
DEADLINE=$((SECONDS + TIMEOUT))

# bounded LIMIT CMD...: CMD (a program, not a function) under min(LIMIT,
# what is left of --timeout) seconds; exit status 124 when stopped. Safe in
# $(...): it never exits the script itself (check_time does, between steps).
bounded() {
  local limit="$1" left=$((DEADLINE - SECONDS))
  shift
  [[ "$left" -ge 1 ]] || left=1
  [[ "$limit" -le "$left" ]] || limit="$left"
  timeout --kill-after=10 "$limit" "$@"
}

# check_time NEXT: fails when --timeout is spent before step NEXT.
check_time() {
  [[ $SECONDS -lt $DEADLINE ]] || fail "out of time: --timeout $TIMEOUT s spent before $1"
}

# ------------------------------------------------------------ 1. binaries
# find_binary NAME SUBDIR: DIR/NAME or DIR/SUBDIR/NAME (a bazel-bin tree).
find_binary() {
  local f
  for f in "$BIN_DIR/$1" "$BIN_DIR/$2/$1"; do
    [[ -x "$f" && -f "$f" ]] && { echo "$f"; return 0; }
  done
  return 1
}

# build_binaries: the normal Bazel build; sets BIN_DIR to its output.
build_binaries() {
  local config=cpu
  [[ "$TARGET" == gpu ]] && config=portable  # CUDA build, every GPU generation
  command -v bazel >/dev/null || fail "no bazel to build the binaries (scripts/setup.sh installs it; or pass --bin_dir)"
  log "building: bazel build --config=$config //server:rankd //client:rankctl //loadtest:rankload"
  (cd "$ROOT" && bounded 3600 bazel build --config="$config" //server:rankd //client:rankctl //loadtest:rankload) >&2 ||
    fail "bazel build --config=$config failed (above)"
  BIN_DIR="$(cd "$ROOT" && bounded 300 bazel info --config="$config" bazel-bin 2>/dev/null)" ||
    fail "bazel info --config=$config bazel-bin failed"
}

# make_context: the build context of Dockerfile.prebuilt in $WORK/context.
make_context() {
  local ctx="$WORK/context" rankd rankctl
  rankd="$(find_binary rankd server)" ||
    fail "--bin_dir $BIN_DIR has no executable rankd (looked for $BIN_DIR/rankd and $BIN_DIR/server/rankd)"
  rankctl="$(find_binary rankctl client)" ||
    fail "--bin_dir $BIN_DIR has no executable rankctl (looked for $BIN_DIR/rankctl and $BIN_DIR/client/rankctl)"
  mkdir -p "$ctx/bin"
  cp "$rankd" "$rankctl" "$ctx/bin/"
  chmod 0755 "$ctx/bin/rankd" "$ctx/bin/rankctl"
  if ! bash "$ROOT/deploy/docker/runtime_packages.sh" "$ctx/bin/rankd" "$ctx/bin/rankctl" \
    >"$ctx/runtime-packages.txt" 2>"$WORK/runtime-packages.err"; then
    fail "runtime_packages.sh: $(tr '\n' ' ' <"$WORK/runtime-packages.err")"
  fi
  log "runtime packages (ldd of $rankd, $rankctl): $(tr '\n' ' ' <"$ctx/runtime-packages.txt")"
  if [[ "$TARGET" == gpu ]]; then
    [[ -f "$CUBLASLT" ]] || fail "--target gpu needs libcublasLt.so.13: $CUBLASLT does not exist (--cublaslt FILE)"
    mkdir -p "$ctx/lib"
    cp -L "$CUBLASLT" "$ctx/lib/libcublasLt.so.13"
  fi
  RANKD_HOST="$ctx/bin/rankd"  # the same binary, run outside for the reference
}

# ------------------------------------------------------------ 3. base image
# The Debian images' own apt and dpkg settings (docker-clean etc.), so that
# a locally made base behaves like debian:12-slim: no package caches or
# indexes left in layers, no documentation, man pages or translations.
write_slim_config() {
  local r="$1"
  cat >"$r/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
# As in Debian's slim images: no documentation, man pages or translations.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  cat >"$r/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'Acquire::Languages "none";' >"$r/etc/apt/apt.conf.d/docker-no-languages"
  echo 'Acquire::GzipIndexes "true";' >"$r/etc/apt/apt.conf.d/docker-gzip-indexes"
  printf 'Apt::AutoRemove::SuggestsImportant "false";\n' >"$r/etc/apt/apt.conf.d/docker-autoremove-suggests"
  # bookworm with its updates and security suites, as the official image.
  rm -f "$r/etc/apt/sources.list"
  cat >"$r/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: ${DEBIAN_MIRROR}
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${DEBIAN_MIRROR%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
}

# slim_rootfs DIR: what debootstrap leaves that an image should not carry.
slim_rootfs() {
  local r="$1"
  write_slim_config "$r"
  find "$r/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$r"/usr/share/{man,groff,info,lintian,linda}/*
  find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/cache/apt/*.bin "$r"/var/lib/apt/lists/*
  find "$r/var/log" -type f -exec truncate -s 0 {} +
  # The container runtime provides these; debootstrap copied this machine's.
  rm -f "$r/etc/hostname" "$r/etc/resolv.conf"
  : >"$r/etc/machine-id"
  rm -rf "${r:?}"/dev/*
}

# make_base_tarball TAR: a Debian 12 minbase root filesystem, slimmed.
make_base_tarball() {
  local tar="$1" rootfs="$WORK/rootfs" start=$SECONDS
  command -v debootstrap >/dev/null ||
    fail "this machine cannot build containers: base image $BASE_IMAGE is not in podman's storage and debootstrap is not installed to make it (scripts/setup.sh installs it)"
  log "base image: debootstrap --variant=minbase bookworm from $DEBIAN_MIRROR (about a minute)"
  if ! bounded 900 debootstrap --variant=minbase bookworm "$rootfs" "$DEBIAN_MIRROR" >"$WORK/debootstrap.log" 2>&1; then
    tail -n 20 "$WORK/debootstrap.log" >&2
    fail "debootstrap --variant=minbase bookworm $DEBIAN_MIRROR failed (log above)"
  fi
  slim_rootfs "$rootfs"
  mkdir -p "$(dirname "$tar")"
  tar --numeric-owner --xattrs -C "$rootfs" -cf "$tar.tmp" . || fail "cannot write $tar.tmp"
  mv "$tar.tmp" "$tar"
  rm -rf "$rootfs"
  log "base image: root filesystem made in $((SECONDS - start)) s ($(du -m "$tar" | cut -f1) MB), cached as $tar"
}

# ensure_base_image: BASE_IMAGE in podman's storage, made here when absent.
ensure_base_image() {
  local tar="$CACHE_DIR/debian-bookworm-minbase-slim.tar"
  if podman image exists "$BASE_IMAGE"; then
    log "base image: $BASE_IMAGE (in podman's storage)"
    BASE_ORIGIN="in podman's storage"
    return
  fi
  case "$BASE_IMAGE" in
    debian:12-slim | debian:bookworm-slim | docker.io/library/debian:12-slim | docker.io/library/debian:bookworm-slim) ;;
    *) fail "base image $BASE_IMAGE is not in podman's storage; only debian:12-slim can be made here (or \`podman pull $BASE_IMAGE\` first)" ;;
  esac
  if [[ -s "$tar" ]]; then
    BASE_ORIGIN="imported from the cached $tar"
  else
    make_base_tarball "$tar"
    BASE_ORIGIN="made by debootstrap"
  fi
  bounded 300 podman import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    --change 'LABEL org.opencontainers.image.description="Debian 12 minbase (debootstrap), slimmed by scripts/build_image.sh"' \
    "$tar" "$BASE_IMAGE" >/dev/null 2>"$WORK/import.err" ||
    fail "podman import $tar as $BASE_IMAGE: $(tr '\n' ' ' <"$WORK/import.err")"
  log "base image: $BASE_IMAGE $BASE_ORIGIN"
}

# ------------------------------------------------------------ 4. build
# podman build keeps every layer (the package layer is reused while the
# package list stays the same); the image a rebuild replaces loses its tag and
# would stay in the storage: remove_replaced_image OLD_ID deletes it (and the
# intermediate layers only it used), never an image still named or in use.
remove_replaced_image() {
  local old="$1" new
  new="$(podman image inspect --format '{{.Id}}' "$TAG")"
  [[ -n "$old" && "$old" != "$new" ]] || return 0
  if [[ -z "$(podman image inspect --format '{{join .RepoTags " "}}' "$old" 2>/dev/null)" ]] &&
    podman rmi "$old" >/dev/null 2>&1; then
    log "removed the image $TAG replaced (${old:0:12})"
  fi
}

# relabel_image: the labels that change from build to build, set again on
# top of the built image. buildah 1.28 reuses a cached LABEL step whose
# ${ARG} values changed (its cache key is the unexpanded text), so with the
# layers cached the image would keep an earlier build's created / revision.
# A LABEL with the values written out misses the cache when they change.
relabel_image() {
  local id
  id="$(podman image inspect --format '{{.Id}}' "$TAG")"
  mkdir -p "$WORK/relabel"
  {
    echo "FROM $id"
    echo "LABEL org.opencontainers.image.created=\"$BUILD_DATE\" org.opencontainers.image.revision=\"${VCS_REF:-unknown}\""
  } >"$WORK/relabel/Dockerfile"
  bounded 300 podman build --isolation chroot --format docker --pull=never -t "$TAG" "$WORK/relabel" \
    >>"$WORK/build.log" 2>&1 || fail "podman build of the labels of $TAG failed: $(tail -3 "$WORK/build.log" | tr '\n' ' ')"
}

build_image() {
  local start=$SECONDS args=() old_id
  BUILD_DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  args=(--isolation chroot --format docker --pull=never -f "$DOCKERFILE" --target "$TARGET" -t "$TAG"
    --build-arg "DEBIAN_SLIM_IMAGE=$BASE_IMAGE" --build-arg "BUILD_DATE=$BUILD_DATE")
  [[ -n "$VCS_REF" ]] && args+=(--build-arg "VCS_REF=$VCS_REF")
  [[ "$NO_CACHE" -eq 1 ]] && args+=(--no-cache)
  old_id="$(podman image inspect --format '{{.Id}}' "$TAG" 2>/dev/null || true)"
  log "podman build ${args[*]} $WORK/context"
  if ! bounded 1200 podman build "${args[@]}" "$WORK/context" >"$WORK/build.log" 2>&1; then
    tail -n 30 "$WORK/build.log" >&2
    fail "podman build of $TAG failed (last lines above; context $WORK/context, Dockerfile $DOCKERFILE)"
  fi
  relabel_image
  BUILD_S=$((SECONDS - start))
  remove_replaced_image "$old_id"
}

# ------------------------------------------------------------ 5. smoke test
# load_config WHAT ARGS...: the variables deploy/tests/image_config.py prints
# (the image's configuration, the compose stack, a rendered overlay).
load_config() {
  local out
  out="$("$PY" "$ROOT/deploy/tests/image_config.py" "$@" 2>"$WORK/image_config.err")" ||
    fail "image_config.py $1 $(basename "${@: -1}"): $(tr '\n' ' ' <"$WORK/image_config.err")"
  eval "$out"
}

# The image's configuration, as podman reports it.
read_image_config() {
  podman image inspect "$TAG" >"$WORK/inspect.json" || fail "podman image inspect $TAG failed"
  "$RANKD_HOST" serve --help >"$WORK/serve-help.txt" 2>&1 || true
  load_config image "$WORK/inspect.json" "$WORK/serve-help.txt"
  log "image: user '$IMG_USER', entrypoint ${IMG_ENTRYPOINT[*]}, cmd ${IMG_CMD[*]}"
  log "image: HEALTHCHECK ${IMG_HC[*]:-(none)} (timeout ${IMG_HC_TIMEOUT_S} s, start period ${IMG_HC_START_S} s)"
}

# check_image_config: user uid 10001 (= the Kubernetes runAsUser), a
# HEALTHCHECK through rankctl health on the port the CMD serves.
check_image_config() {
  local uid="${IMG_USER%%:*}"
  [[ "$uid" =~ ^[0-9]+$ ]] || fail "the image's USER '$IMG_USER' is not a numeric uid (Kubernetes runAsNonRoot needs one)"
  [[ "$uid" -ne 0 ]] || fail "the image runs as root (USER $IMG_USER)"
  [[ "$uid" == "$K8S_UID" ]] || fail "the image's USER $uid differs from the Kubernetes runAsUser $K8S_UID"
  [[ "$uid" == 10001 ]] || fail "the image's USER is $uid, want 10001"
  [[ "${#IMG_HC[@]}" -gt 0 ]] || fail "the image has no HEALTHCHECK (was it built with --format oci?)"
  [[ "${IMG_HC[0]}" == rankctl && "${IMG_HC[1]:-}" == health ]] ||
    fail "the image's HEALTHCHECK runs '${IMG_HC[*]}', not rankctl health"
  [[ "$IMG_HC_TARGET" =~ ^(127\.0\.0\.1|localhost|\[::1\]):[0-9]+$ ]] ||
    fail "the HEALTHCHECK's --target '$IMG_HC_TARGET' is not a loopback address with a port"
  [[ -n "$IMG_GRPC_PORT" ]] || fail "the image's entrypoint + CMD (${IMG_ENTRYPOINT[*]} ${IMG_CMD[*]}) is not rankd serve"
  [[ "$IMG_HC_PORT" == "$IMG_GRPC_PORT" ]] ||
    fail "the HEALTHCHECK checks port $IMG_HC_PORT but the image's CMD serves gRPC on $IMG_GRPC_PORT"
  pass "image config: USER $IMG_USER (= k8s runAsUser), ENTRYPOINT ${IMG_ENTRYPOINT[*]}, HEALTHCHECK on the CMD's gRPC port $IMG_GRPC_PORT"
}

PASSED=()
SKIPPED=()
pass() {
  PASSED+=("ok: $*")
  log "ok: $*"
}
skip() {
  PASSED+=("skipped: $*")
  SKIPPED+=("$*")
  log "skipped: $*"
}

# ---- the two runners: ctr_start NAME, ctr_run NAME, ctr_exec NAME ARGV...,
# ctr_alive NAME, ctr_pid NAME, ctr_stop NAME GRACE_S (sets CTR_RC), ctr_logs
# NAME. What runs: RUN_ENTRYPOINT (empty: the image's) and RUN_ARGS (empty:
# the image's CMD, unless RUN_ENTRYPOINT is set: Docker's rule), RUN_VOLUMES
# (HOST:TARGET[:ro]), RUN_HARDENED=1: read-only root, tmpfs /tmp, no
# capabilities, no privilege escalation (compose and Kubernetes settings).
RUN_ENTRYPOINT=()
RUN_ARGS=()
RUN_VOLUMES=()
RUN_HARDENED=0
PODMAN_GLOBAL=()  # e.g. --runtime runc
PODMAN_RUN=()     # e.g. --ulimit ...
declare -A CTR_PID=()   # chroot: NAME -> the server's pid
declare -A CTR_NS=()    # chroot: NAME -> its unshare pid (holds the namespaces)
declare -A CTR_LOG=()

# The argv the image runs for RUN_ENTRYPOINT / RUN_ARGS (chroot runner).
effective_argv() {
  if [[ "${#RUN_ENTRYPOINT[@]}" -gt 0 ]]; then
    ARGV=("${RUN_ENTRYPOINT[@]}" "${RUN_ARGS[@]}")
  elif [[ "${#RUN_ARGS[@]}" -gt 0 ]]; then
    ARGV=("${IMG_ENTRYPOINT[@]}" "${RUN_ARGS[@]}")
  else
    ARGV=("${IMG_ENTRYPOINT[@]}" "${IMG_CMD[@]}")
  fi
}

podman_run_args() {
  local v
  PR=(--network=none)
  for v in "${RUN_VOLUMES[@]}"; do PR+=(-v "$v"); done
  # Docker's --read-only mounts no tmpfs of its own (podman's would add
  # /run and /var/tmp): only the /tmp that compose and the manifests give.
  [[ "$RUN_HARDENED" -eq 1 ]] &&
    PR+=(--read-only --read-only-tmpfs=false --tmpfs /tmp --cap-drop=ALL --security-opt=no-new-privileges)
  if [[ "${#RUN_ENTRYPOINT[@]}" -gt 0 ]]; then
    PR+=(--entrypoint "$("$PY" -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "${RUN_ENTRYPOINT[@]}")")
  fi
  PR+=("$TAG" "${RUN_ARGS[@]}")
}

ctr_start() {
  local name="$RUN_ID-$1"
  CTR_LOG[$1]="$WORK/$1.log"
  if [[ "$RUNNER" == podman ]]; then
    podman_run_args
    PODMAN_CTRS+=("$name")
    bounded 120 podman "${PODMAN_GLOBAL[@]}" run -d --name "$name" "${PODMAN_RUN[@]}" "${PR[@]}" \
      >"${CTR_LOG[$1]}" 2>&1 || fail "podman run $1: $(grep -v systemd "${CTR_LOG[$1]}" | tail -3 | tr '\n' ' ')"
    return
  fi
  effective_argv
  local vol_args=("${#RUN_VOLUMES[@]}" "${RUN_VOLUMES[@]}") env_args=("${#IMG_ENV[@]}" "${IMG_ENV[@]}")
  unshare --mount --net --fork -- bash "$SCRIPT" __chroot_child "$ROOTFS" "$RUN_HARDENED" "$IMG_USER" \
    "$IMG_WORKDIR" "${vol_args[@]}" "${env_args[@]}" "${ARGV[@]}" >"${CTR_LOG[$1]}" 2>&1 &
  local ns=$! child="" i
  SERVER_PIDS+=("$ns")
  CTR_NS[$1]="$ns"
  # The forked child (the command, after its execs) appears at once; a
  # one-shot command may also be done already (ctr_run reads its status).
  for ((i = 0; i < 50; i++)); do
    child="$(ps -o pid= --ppid "$ns" 2>/dev/null | tr -d ' ' | head -1 || true)"
    [[ -n "$child" ]] || ! kill -0 "$ns" 2>/dev/null && break
    sleep 0.1
  done
  [[ -n "$child" ]] || ! kill -0 "$ns" 2>/dev/null ||
    fail "chroot runner: $1 did not start: $(tail -3 "${CTR_LOG[$1]}" | tr '\n' ' ')"
  CTR_PID[$1]="$child"
}

# ctr_run NAME LIMIT_S: a one-shot container in the foreground; its status.
ctr_run() {
  local rc=0
  ctr_start "$1"
  if [[ "$RUNNER" == podman ]]; then
    bounded "$2" podman wait "$RUN_ID-$1" >"$WORK/$1.rc" 2>/dev/null || rc=$?
    [[ "$rc" -eq 0 ]] && rc="$(tail -1 "$WORK/$1.rc")"
    podman logs "$RUN_ID-$1" >"${CTR_LOG[$1]}" 2>&1 || true
    podman rm -f -t 0 "$RUN_ID-$1" >/dev/null 2>&1 || true
  else
    local ns="${CTR_NS[$1]}" end=$((SECONDS + $2))
    while kill -0 "$ns" 2>/dev/null && [[ $SECONDS -lt $end && $SECONDS -lt $DEADLINE ]]; do sleep 0.2; done
    if kill -0 "$ns" 2>/dev/null; then
      kill_tree "$ns"
      rc=124
    else
      wait "$ns" || rc=$?
    fi
  fi
  return "$rc"
}

# ctr_exec NAME LIMIT_S ARGV...: ARGV in the running container NAME, as the
# image's user, in its network (loopback) and mounts.
ctr_exec() {
  local name="$1" limit="$2"
  shift 2
  if [[ "$RUNNER" == podman ]]; then
    bounded "$limit" podman exec "$RUN_ID-$name" "$@"
  else
    bounded "$limit" nsenter --target "${CTR_NS[$name]}" --mount --net -- \
      env -i "${IMG_ENV[@]}" chroot --userspec="$IMG_USER" "$ROOTFS" "$@"
  fi
}

ctr_pid() {
  if [[ "$RUNNER" == podman ]]; then
    podman inspect -f '{{.State.Pid}}' "$RUN_ID-$1"
  else
    echo "${CTR_PID[$1]}"
  fi
}

ctr_alive() {
  if [[ "$RUNNER" == podman ]]; then
    [[ "$(podman inspect -f '{{.State.Running}}' "$RUN_ID-$1" 2>/dev/null)" == true ]]
  else
    kill -0 "${CTR_NS[$1]}" 2>/dev/null
  fi
}

ctr_logs() {
  if [[ "$RUNNER" == podman ]]; then
    podman logs "$RUN_ID-$1" 2>&1 | tail -n "${2:-20}"
  else
    tail -n "${2:-20}" "${CTR_LOG[$1]}"
  fi
}

# ctr_stop NAME GRACE_S: the image's STOPSIGNAL, then up to GRACE_S seconds
# to exit; CTR_RC = its exit status (137 / 124: killed at the end of the grace).
ctr_stop() {
  local name="$1" grace="$2"
  CTR_RC=""
  if [[ "$RUNNER" == podman ]]; then
    # podman stop sends the image's StopSignal, SIGKILL after -t seconds.
    bounded $((grace + 30)) podman stop -t "$grace" "$RUN_ID-$name" >/dev/null 2>&1 || true
    CTR_RC="$(podman inspect -f '{{.State.ExitCode}}' "$RUN_ID-$name" 2>&1 || true)"
    podman logs "$RUN_ID-$name" >"${CTR_LOG[$name]}" 2>&1 || true
    podman rm -f "$RUN_ID-$name" >/dev/null 2>&1 || true
    return
  fi
  local ns="${CTR_NS[$name]}" end=$((SECONDS + grace))
  kill -s "${IMG_STOPSIGNAL#SIG}" "${CTR_PID[$name]}" 2>/dev/null || true
  while kill -0 "$ns" 2>/dev/null && [[ $SECONDS -lt $end ]]; do sleep 0.2; done
  if kill -0 "$ns" 2>/dev/null; then
    kill_tree "$ns"
    CTR_RC=137
  else
    CTR_RC=0
    wait "$ns" || CTR_RC=$?
  fi
}

# ---- runner choice
# probe_podman_run: true when `podman run` works here, trying the ways this
# machine may need (each one a /bin/true container without network):
#   as is; with the open-files and process limits lowered to what this
#   machine grants (podman asks for 1048576 open files, which needs
#   CAP_SYS_RESOURCE where the hard limit is lower, and runs the runtime
#   with at most kernel.pid_max processes); and the same with runc (crun
#   1.8 refuses hosts whose cgroup v1 and v2 hierarchies are mixed).
probe_podman_run() {
  local nofile nproc pid_max limits
  nofile="$(ulimit -Hn)"
  nproc="$(ulimit -Hu)"
  pid_max="$(cat /proc/sys/kernel/pid_max)"
  [[ "$nofile" == unlimited ]] && nofile=1048576
  [[ "$nproc" == unlimited || "$nproc" -gt "$pid_max" ]] && nproc="$pid_max"
  limits="--ulimit nofile=$nofile:$nofile --ulimit nproc=$nproc:$nproc"
  PROBE_ERRORS=""
  try_podman_run "" "" && return 0
  try_podman_run "" "$limits" && return 0
  command -v runc >/dev/null && try_podman_run "--runtime runc" "$limits" && return 0
  return 1
}

# try_podman_run GLOBAL_OPTIONS RUN_OPTIONS (words): on success they become
# PODMAN_GLOBAL / PODMAN_RUN of every container; else the error is noted.
try_podman_run() {
  local g=() r=() out
  read -r -a g <<<"$1"
  read -r -a r <<<"$2"
  if out="$(bounded 60 podman "${g[@]}" run --rm --network=none "${r[@]}" --entrypoint /bin/true "$TAG" 2>&1)"; then
    PODMAN_GLOBAL=("${g[@]}")
    PODMAN_RUN=("${r[@]}")
    log "runner: \`podman ${g[*]:+${g[*]} }run ${r[*]}\` works"
    return 0
  fi
  # podman also logs that it has no systemd for health check timers: noise.
  out="$(grep -v -e 'systemd' <<<"$out" | tail -1 || true)"
  PROBE_ERRORS+="podman ${g[*]:+${g[*]} }run ${r[*]:+${r[*]} }fails: ${out:-no message}; "
  return 1
}

# probe_chroot: true when the chroot runner can work (root, unshare, nsenter).
probe_chroot() {
  [[ "$(id -u)" -eq 0 ]] || { CHROOT_ERROR="not root"; return 1; }
  local t
  for t in unshare nsenter chroot ip ps; do
    command -v "$t" >/dev/null || { CHROOT_ERROR="no $t"; return 1; }
  done
  CHROOT_ERROR="$(bounded 30 unshare --mount --net --fork -- ip link set lo up 2>&1)" || return 1
}

# mount_rootfs: the image's root filesystem, writable, in a container that is
# created (not run): the image itself is never changed.
mount_rootfs() {
  ROOTFS_CTR="$RUN_ID-rootfs"
  podman create --name "$ROOTFS_CTR" "$TAG" >/dev/null 2>"$WORK/create.err" ||
    fail "podman create $TAG: $(tr '\n' ' ' <"$WORK/create.err")"
  ROOTFS="$(podman mount "$ROOTFS_CTR" 2>"$WORK/mount.err")" ||
    fail "podman mount $ROOTFS_CTR: $(tr '\n' ' ' <"$WORK/mount.err")"
  [[ -x "$ROOTFS/usr/local/bin/rankd" ]] || fail "the image's root filesystem ($ROOTFS) has no /usr/local/bin/rankd"
  # chroot --userspec would look a lone uid's group up on this machine.
  [[ "$IMG_USER" == *:* ]] || fail "chroot runner: the image's USER '$IMG_USER' has no group (want UID:GID)"
}

choose_runner() {
  local want="$RUNNER"
  if [[ "$want" != chroot ]] && probe_podman_run; then
    RUNNER=podman
  elif [[ "$want" == podman ]]; then
    fail "this machine cannot run containers with podman: ${PROBE_ERRORS%; }"
  elif probe_chroot; then
    [[ "$want" == auto ]] && log "runner: podman run does not work here (${PROBE_ERRORS% }); chroot into the image's root filesystem instead"
    RUNNER=chroot
    mount_rootfs
  else
    fail "this machine cannot run containers: ${PROBE_ERRORS}chroot: $CHROOT_ERROR"
  fi
}

# ---- smoke steps
# wait_healthy NAME: the image's HEALTHCHECK command, inside the container,
# until it passes (within the start period, bounded); HEALTH_OUT = its output.
wait_healthy() {
  local name="$1" limit="$IMG_HC_START_S" end
  [[ "$limit" -gt 0 && "$limit" -le 180 ]] || limit=180
  end=$((SECONDS + limit))
  while [[ $SECONDS -lt $end ]]; do
    ctr_alive "$name" || fail "$name: rankd exited before answering the HEALTHCHECK: $(ctr_logs "$name" 10 | tr '\n' ' ')"
    if HEALTH_OUT="$(ctr_exec "$name" $((IMG_HC_TIMEOUT_S + 10)) "${IMG_HC[@]}" 2>&1)"; then
      grep -qw SERVING <<<"$HEALTH_OUT" || fail "$name: HEALTHCHECK passed but printed no SERVING: $HEALTH_OUT"
      return 0
    fi
    [[ $SECONDS -lt $DEADLINE ]] || fail "out of time (--timeout $TIMEOUT) waiting for $name to be healthy"
    sleep 1
  done
  fail "$name: the HEALTHCHECK (${IMG_HC[*]}) did not pass within $limit s: $HEALTH_OUT; rankd: $(ctr_logs "$name" 10 | tr '\n' ' ')"
}

# check_server_uid NAME: the serving process runs as the image's user.
check_server_uid() {
  local pid uid
  pid="$(ctr_pid "$1" || true)"
  uid="$(awk '/^Uid:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)"
  [[ "$uid" == "${IMG_USER%%:*}" ]] || fail "$1: rankd (pid $pid) runs as uid '$uid', the image's USER is $IMG_USER"
}

# stop_and_check NAME GRACE_S: drains on the STOPSIGNAL and exits 0 in time.
stop_and_check() {
  ctr_stop "$1" "$2"
  [[ "$CTR_RC" == 0 ]] ||
    fail "$1: rankd exited with $CTR_RC after ${IMG_STOPSIGNAL} (want 0 within $2 s): $(tail -5 "${CTR_LOG[$1]}" | tr '\n' ' ')"
}

# volumes: models (made by the demo init container), io (requests, scores),
# writable by the image's user, as a volume provisioner would make them.
make_volumes() {
  local d
  for d in models io compose-models; do
    mkdir -p "$WORK/$d"
    chown "$IMG_USER" "$WORK/$d"
  done
}

# smoke_models: the demo overlay's init container (k8s `args` = the image's
# CMD replaced) generates the model into the models volume.
smoke_models() {
  RUN_ENTRYPOINT=()
  RUN_ARGS=("${INIT_ARGS[@]}")
  RUN_VOLUMES=("$WORK/models:/models")
  RUN_HARDENED=1
  [[ "${#RUN_ARGS[@]}" -gt 0 ]] || fail "the demo overlay has no init container args to generate the model with"
  ctr_run init-models 300 || fail "init container (${RUN_ARGS[*]}) failed: $(tail -5 "${CTR_LOG[init-models]}" | tr '\n' ' ')"
  MODEL_DIR="$(find "$WORK/models" -name model.pbtxt -printf '%h\n' | head -1 || true)"
  [[ -n "$MODEL_DIR" ]] || fail "the init container (${RUN_ARGS[*]}) wrote no model.pbtxt under /models"
  pass "demo model: the k8s demo init container (args ${RUN_ARGS[*]}) in the image wrote /models${MODEL_DIR#"$WORK/models"}"
}

# smoke_serve: the image's ENTRYPOINT + CMD, unchanged, serve the model;
# health via the HEALTHCHECK; scores inside == `rankd score` outside.
smoke_serve() {
  RUN_ENTRYPOINT=()
  RUN_ARGS=()
  RUN_VOLUMES=("$WORK/models:/models:ro" "$WORK/io:/smoke")
  RUN_HARDENED=0
  bounded 120 "$RANKD_HOST" gen-requests --model "$MODEL_DIR" --output "$WORK/io/requests.jsonl" \
    --count 16 --candidates 32 --seed 5 2>"$WORK/gen-requests.err" ||
    fail "rankd gen-requests: $(tr '\n' ' ' <"$WORK/gen-requests.err")"
  chown "$IMG_USER" "$WORK/io/requests.jsonl"
  bounded 300 "$RANKD_HOST" score --model "$MODEL_DIR" --input "$WORK/io/requests.jsonl" \
    --output "$WORK/scores.outside.jsonl" 2>"$WORK/score.err" || fail "rankd score (outside): $(tr '\n' ' ' <"$WORK/score.err")"
  ctr_start serve
  wait_healthy serve
  check_server_uid serve
  pass "image CMD (${IMG_ENTRYPOINT[*]} ${IMG_CMD[*]}): HEALTHCHECK says '$(tr '\n' ' ' <<<"$HEALTH_OUT" | sed 's/ *$//')', rankd runs as uid ${IMG_USER%%:*}"
  if [[ "$RUNNER" == podman ]]; then
    # podman's own reading of the image's HEALTHCHECK agrees.
    bounded 60 podman healthcheck run "$RUN_ID-serve" >/dev/null 2>&1 || fail "podman healthcheck run: unhealthy"
  fi
  ctr_exec serve 300 rankctl score --target "$IMG_HC_TARGET" --input /smoke/requests.jsonl \
    --output /smoke/scores.image.jsonl >"$WORK/rankctl.out" 2>&1 || fail "rankctl score in the image: $(tail -3 "$WORK/rankctl.out" | tr '\n' ' ')"
  cmp -s "$WORK/scores.outside.jsonl" "$WORK/io/scores.image.jsonl" ||
    fail "scores differ: rankctl score in the image ($WORK/io/scores.image.jsonl) vs rankd score outside ($WORK/scores.outside.jsonl)"
  pass "scores: rankctl score in the image == rankd score outside, byte for byte ($(wc -l <"$WORK/scores.outside.jsonl") responses)"
  stop_and_check serve 40
  pass "image STOPSIGNAL ($IMG_STOPSIGNAL): drained, exit 0"
}

# serve_with NAME PORT GRACE_S: RUN_* as set; healthy via the image's
# HEALTHCHECK (so PORT, the args' --grpc_port, must be the one it checks),
# then a drain within GRACE_S.
serve_with() {
  local name="$1" port="$2" grace="$3"
  [[ "$port" == "$IMG_HC_PORT" ]] ||
    fail "$name serves gRPC on $port but the image's HEALTHCHECK checks $IMG_HC_PORT: Docker would call it unhealthy"
  ctr_start "$name"
  wait_healthy "$name"
  check_server_uid "$name"
  if [[ "$RUN_HARDENED" -eq 1 ]] && ctr_exec "$name" 30 touch /rankd-write-probe >/dev/null 2>&1; then
    fail "$name: the root filesystem is writable, the read-only run tested nothing"
  fi
  stop_and_check "$name" "$grace"
}

# smoke_compose: the compose stack's models service into an empty volume,
# then its rankd service (command, read_only, tmpfs) serving it.
smoke_compose() {
  local files=("$ROOT/deploy/compose/compose.yaml")
  [[ "$TARGET" == gpu ]] && files+=("$ROOT/deploy/compose/compose.gpu.yaml")
  load_config compose "$WORK/serve-help.txt" "${files[@]}"
  RUN_ENTRYPOINT=("${COMPOSE_MODELS_ENTRYPOINT[@]}")
  RUN_ARGS=("${COMPOSE_MODELS_CMD[@]}")
  RUN_VOLUMES=("$WORK/compose-models:$COMPOSE_MODELS_TARGET")
  RUN_HARDENED=0
  ctr_run compose-models 600 || fail "compose models service failed: $(tail -5 "${CTR_LOG[compose-models]}" | tr '\n' ' ')"
  [[ -n "$(find "$WORK/compose-models" -name model.pbtxt)" ]] || fail "the compose models service wrote no model"
  pass "compose models service: $(find "$WORK/compose-models" -name model.pbtxt | wc -l) model(s) generated in the image"
  if [[ " ${COMPOSE_RANKD_CMD[*]} " == *" --backend=cuda "* ]]; then
    skip "compose rankd (${COMPOSE_RANKD_CMD[*]}): --backend=cuda needs a GPU"
    return
  fi
  RUN_ENTRYPOINT=("${COMPOSE_RANKD_ENTRYPOINT[@]}")
  RUN_ARGS=("${COMPOSE_RANKD_CMD[@]}")
  RUN_VOLUMES=("$WORK/compose-models:/models:ro")
  RUN_HARDENED="$COMPOSE_RANKD_READ_ONLY"
  serve_with compose-rankd "$COMPOSE_RANKD_GRPC_PORT" "$COMPOSE_RANKD_GRACE_S"
  pass "compose rankd command (${COMPOSE_RANKD_CMD[*]}), read-only root: healthy, drained within stop_grace_period ${COMPOSE_RANKD_GRACE_S} s"
}

# smoke_k8s: the rendered overlay's rankd container args (image ENTRYPOINT
# kept) with readOnlyRootFilesystem, drained within the grace period less
# the preStop sleep.
smoke_k8s() {
  if [[ "$K8S_BACKEND" == cuda ]]; then
    skip "k8s $K8S_OVERLAY overlay args (${K8S_ARGS[*]}): --backend=cuda needs a GPU"
    return
  fi
  RUN_ENTRYPOINT=("${K8S_COMMAND[@]}")
  RUN_ARGS=("${K8S_ARGS[@]}")
  RUN_VOLUMES=("$WORK/models:/models:ro")
  RUN_HARDENED="$K8S_READ_ONLY"
  serve_with k8s-rankd "$K8S_GRPC_PORT" $((K8S_GRACE_S - K8S_PRESTOP_S))
  pass "k8s $K8S_OVERLAY overlay args (${K8S_ARGS[*]}), read-only root: healthy, drained within $((K8S_GRACE_S - K8S_PRESTOP_S)) s"
}

# read_k8s: the overlays as kubectl renders them. The demo overlay (cpu +
# an init container that generates the model) gives the model's init args
# and the runAsUser; the overlay of the image's target (cpu: demo, gpu: gpu)
# gives the serving args.
read_k8s() {
  K8S_OVERLAY=demo
  render_overlay demo
  load_config k8s "$WORK/serve-help.txt" "$WORK/k8s-demo.yaml"
  INIT_ARGS=("${K8S_INIT_ARGS[@]}")
  if [[ "$TARGET" == gpu ]]; then
    K8S_OVERLAY=gpu
    render_overlay gpu
    load_config k8s "$WORK/serve-help.txt" "$WORK/k8s-gpu.yaml"
  fi
}

render_overlay() {
  command -v kubectl >/dev/null || fail "no kubectl to render deploy/k8s/overlays/$1 (scripts/setup.sh installs it)"
  HOME="$WORK" bounded 120 kubectl kustomize "$ROOT/deploy/k8s/overlays/$1" >"$WORK/k8s-$1.yaml" 2>"$WORK/k8s.err" ||
    fail "kubectl kustomize deploy/k8s/overlays/$1: $(tr '\n' ' ' <"$WORK/k8s.err")"
}

smoke_test() {
  local start=$SECONDS step
  read_image_config
  read_k8s
  check_image_config
  choose_runner
  make_volumes
  for step in smoke_models smoke_serve smoke_compose smoke_k8s; do
    check_time "$step"
    "$step"
  done
  SMOKE_S=$((SECONDS - start))
}

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
