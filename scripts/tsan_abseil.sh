#!/usr/bin/env bash
# Builds Debian's abseil (the same source package and patches as the
# installed libabsl*.so.20220623, so the same ABI and inline namespace)
# with ThreadSanitizer into a private prefix, for `--config=tsan` test runs.
#
# Why: Debian's abseil is not instrumented, so absl::Mutex (which rankd and
# gRPC use for all locking) is invisible to TSan, which then reports every
# access to mutex-guarded data as a race. Running the tests with
# LD_LIBRARY_PATH pointing here swaps in instrumented copies for rankd and
# for gRPC alike; TSan then sees absl::Mutex, CondVar and Notification.
#
# The source comes through apt (deb-src of the same suite, a private sources
# list: nothing under /etc/apt changes). Idempotent: a finished build is
# reused. Prints the library directory last.
# Usage: scripts/tsan_abseil.sh [PREFIX]   (default ~/.cache/rankd/tsan-abseil)
set -euo pipefail

prefix="${1:-${HOME}/.cache/rankd/tsan-abseil}"
libdir="$prefix/lib"
if [[ -f "$prefix/.done" ]]; then
  echo "$libdir"
  exit 0
fi

version=$(dpkg-query -W -f='${source:Version}' libabsl20220623)
work="$prefix/src"
rm -rf "$work"
mkdir -p "$work/lists/partial" "$work/parts"
# A private deb-src list for the installed suite.
suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
cat >"$work/parts/src.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/parts"
          -o "Dir::State::Lists=$work/lists" -o APT::Sandbox::User=root)
apt-get "${apt_opts[@]}" -qq update
(cd "$work" && apt-get "${apt_opts[@]}" -qq source --download-only "abseil=$version")
# With Debian's patches: they set the inline namespace (debian3) and options.
(cd "$work" && dpkg-source -x abseil_*.dsc absl >/dev/null)
grep -q 'INLINE_NAMESPACE_NAME debian' "$work/absl/absl/base/options.h" ||
  { echo "tsan_abseil: Debian's patches are not applied" >&2; exit 1; }

# As debian/rules' shared build, with clang-14 and -fsanitize=thread. The
# shared objects leave __tsan_* undefined: the test executable provides them.
cmake -S "$work/absl" -B "$work/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_C_FLAGS="-fsanitize=thread -gline-tables-only" \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -gline-tables-only" \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib >/dev/null
ninja -C "$work/build" -j "${JOBS:-2}" >/dev/null
ninja -C "$work/build" install >/dev/null
# Same sonames as Debian's: check one, so a mismatch fails here, not in a test.
want=$(objdump -p /usr/lib/x86_64-linux-gnu/libabsl_synchronization.so.20220623 | awk '/SONAME/{print $2}')
[[ -f "$libdir/$want" ]] || { echo "tsan_abseil: $want not built (sonames differ)" >&2; exit 1; }
rm -rf "$work"
touch "$prefix/.done"
echo "$libdir"
