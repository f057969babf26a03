#!/usr/bin/env bash
# One "container" of scripts/build_image.sh's chroot runner, not for users:
# the runner starts this script through unshare(1); in the new mount and
# network namespaces it sets up loopback, /proc, /sys, a minimal /dev and the
# volumes, then execs the command in the image's root filesystem.
#   chroot_child.sh ROOTFS READ_ONLY USERSPEC WORKDIR NVOL VOL... NENV ENV... ARGV...
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
set -euo pipefail
chroot_child "$@"

