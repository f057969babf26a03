# scripts/build_image.sh, part: the image configuration and the two container runners (podman run, chroot). Sourced by build_image.sh (never run
# alone); uses its options and globals (build_image.sh documents them).
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
  unshare --mount --net --fork -- bash "$CHROOT_CHILD" "$ROOTFS" "$RUN_HARDENED" "$IMG_USER" \
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

