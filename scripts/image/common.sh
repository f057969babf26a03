# scripts/build_image.sh, part: the verdict, clean-up and time bounds. Sourced by build_image.sh (never run
# alone); uses its options and globals (build_image.sh documents them).
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

