#!/usr/bin/env bash
# Packs binaries built here, with the shared libraries they load that a bare
# GPU machine may not have, into OUTDIR, so that OUTDIR can be carried to the
# GPU machine (inside the repository, in a git-ignored folder) and run there:
#   OUTDIR/bin/<binary>     the binaries
#   OUTDIR/lib/*.so*        their libraries (Debian's gRPC, protobuf, abseil, ...)
#   OUTDIR/run NAME ARGS... runs bin/NAME with lib/ first on the loader's path
# glibc, the dynamic loader and the NVIDIA driver's libraries stay out: they
# must be those of the machine the program runs on.
# Usage: scripts/gpu_bundle.sh OUTDIR BINARY [BINARY...]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OUTDIR BINARY [BINARY...]" >&2; exit 2; }
out=$1
shift
mkdir -p "$out/bin" "$out/lib"
# Libraries that come from the target machine.
system='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libcuda\.so|libnvidia)'
for binary in "$@"; do
  [ -f "$binary" ] || { echo "gpu_bundle: no such binary: $binary" >&2; exit 1; }
  cp -L "$binary" "$out/bin/"
  ldd "$binary" | awk '$2 == "=>" { print $1, $3 }' | while read -r name path; do
    [[ "$name" =~ $system ]] && continue
    [ -f "$path" ] || { echo "gpu_bundle: $binary needs $name, not found here" >&2; exit 1; }
    cp -Lu "$path" "$out/lib/"
  done
done
cat >"$out/run" <<'RUN'
#!/usr/bin/env bash
# run NAME ARGS...: bin/NAME with this bundle's libraries.
here=$(cd "$(dirname "$0")" && pwd)
name=$1
shift
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/bin/$name" "$@"
RUN
chmod +x "$out/run"
echo "bundle size: $(du -sh "$out" | cut -f1)"
