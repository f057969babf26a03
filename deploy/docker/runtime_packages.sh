#!/usr/bin/env bash
# Prints, one per line and sorted, the Debian packages that own the shared
# libraries BINARY... load (as `ldd` resolves them on this machine). The
# Dockerfile's builder stage runs it on rankd and rankctl, and the runtime
# stages `apt-get install` exactly that list: the runtime gets the same
# library packages the binaries were linked against, and nothing else (no
# compilers, no -dev packages).
#
# Fails (exit 1, the offending library on stderr) when a library is not found
# or is not owned by any Debian package: such a library would be missing from
# the image. Libraries loaded with dlopen (cuBLASLt) are not seen by ldd; the
# Dockerfile copies that one explicitly.
#
# Usage: runtime_packages.sh BINARY...
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }

ldd_out=$(ldd "$@") || { echo "runtime_packages: ldd failed on $*" >&2; exit 1; }
if grep -q 'not found' <<<"$ldd_out"; then
  echo "runtime_packages: unresolved libraries:" >&2
  grep 'not found' <<<"$ldd_out" >&2
  exit 1
fi

# "libfoo.so.1 => /lib/x86_64-linux-gnu/libfoo.so.1 (0x...)" and the loader
# line "/lib64/ld-linux-x86-64.so.2 (0x...)"; the vDSO has no path.
libs=$(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $2 ~ /^\(/ { print $1 }' \
  <<<"$ldd_out" | sort -u)
[ -n "$libs" ] || { echo "runtime_packages: ldd listed no libraries for $*" >&2; exit 1; }

# Debian 12 is merged-/usr: ldd may print /lib/... where dpkg registered
# /usr/lib/... (or the other way round), or a symlink whose target is what
# dpkg knows. Every spelling of every library goes to one dpkg-query call.
spellings() {
  local p
  for p in "$1" "$(readlink -f "$1")"; do
    echo "$p"
    case "$p" in
      /usr/*) echo "${p#/usr}" ;;
      *) echo "/usr$p" ;;
    esac
  done
}
declare -A owner_of=()
# "libgrpc++1.51:amd64: /usr/lib/x86_64-linux-gnu/libgrpc++.so.1.51"
# (several owners: "libc6:amd64, libc6-dev:amd64: PATH").
while IFS= read -r line; do
  path="${line##*: }"
  owners="${line%: *}"
  owner_of["$path"]="$owners"
done < <(for lib in $libs; do spellings "$lib"; done | sort -u |
  xargs dpkg-query -S 2>/dev/null | grep -v '^diversion ' || true)

status=0
pkgs=()
for lib in $libs; do
  found=""
  while read -r s; do
    if [ -n "${owner_of[$s]:-}" ]; then found="${owner_of[$s]}"; break; fi
  done < <(spellings "$lib")
  if [ -z "$found" ]; then
    echo "runtime_packages: $lib is not owned by any Debian package" >&2
    status=1
    continue
  fi
  IFS=',' read -ra names <<<"$found"
  for n in "${names[@]}"; do
    n="${n# }"
    pkgs+=("${n%%:*}")
  done
done
[ "$status" -eq 0 ] || exit 1
printf '%s\n' "${pkgs[@]}" | sort -u
