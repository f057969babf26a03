#!/bin/bash
# The architectures nvcc puts into a kernel library, read back from its
# .nv_fatbin section (tools/fatbin_archs.py; there is no cuobjdump here):
# --config=portable's flags give a cubin for every supported GPU generation
# plus PTX of the newest; the default build gives Hopper's cubin plus its PTX.
set -u
root="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-}"
archs() { /usr/bin/python3 "$root/tools/fatbin_archs.py" "$root/kernels/cuda/$1"; }
failures=0
check() {  # check NAME GOT WANT
  if [[ "$2" == "$3" ]]; then
    echo "ok: $1: $2"
  else
    echo "FAIL: $1: got '$2', want '$3'"
    failures=$((failures + 1))
  fi
}
check "portable build" "$(archs librow_scatter_portable_cu.a)" "compute_100 sm_80 sm_86 sm_89 sm_90 sm_100"
check "default build" "$(archs librow_scatter_cu.a)" "compute_90 sm_90"
exit $((failures > 0))
