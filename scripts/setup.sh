#!/usr/bin/env bash
# Installs every Debian package that rankd's build, tests and tools need.
# Idempotent: re-running it on a machine that already has everything is quick.
# Used by the README, .ci/run and the Dockerfiles, so all build the same way.
set -euo pipefail

packages=(
  bazel-bootstrap bazel-rules-java pkg-config g++ git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libfmt-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libeigen3-dev libssl-dev openssl libcpp-httplib-dev
  python3-grpcio python3-grpc-tools python3-numpy python3-protobuf
  # The Python client package: an offline pip install into a venv (client/python).
  python3-venv python3-pip python3-setuptools python3-wheel
  prometheus curl yamllint python3-yaml gnuplot-nox
  # Sanitizer, thread-safety and fuzz builds (docs/testing.md); cmake, ninja
  # and dpkg-dev build abseil for TSan from its source package.
  clang-14 libclang-rt-14-dev libfuzzer-14-dev cmake ninja-build dpkg-dev
  # The runtime image from built binaries (scripts/build_image.sh): podman
  # builds it (no Docker engine), debootstrap makes the Debian 12 base image
  # when none is in podman's storage; runc runs its smoke-test containers
  # where crun cannot (hosts with mixed cgroup v1/v2 hierarchies); iproute2
  # brings up loopback where the smoke test falls back to chroot.
  podman debootstrap runc iproute2
)
# kubectl for `kubectl kustomize` (deploy/ tests): Debian's kubernetes-client
# only where no kubectl command exists; an installed one (e.g. from the Kubernetes
# project's own repository, newer) is used as is.
command -v kubectl >/dev/null 2>&1 || packages+=(kubernetes-client)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
