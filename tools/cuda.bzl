"""CUDA (.cu) libraries built with nvcc for sm_90 (H100 / H200).

nvcc compiles the sources into a static library (-fPIC: tests link shared),
which a cc_import with alwayslink wraps. Host code that only includes the
library's headers needs no CUDA headers unless those headers include them.
"""

NVCC = "/usr/local/cuda/bin/nvcc"

NVCC_FLAGS = " ".join([
    "-std=c++17",
    "-O3",
    "-Xcompiler -fPIC",
    "-gencode=arch=compute_90,code=sm_90",
    "-lineinfo",
    "-I.",
])

def cuda_library(name, srcs, hdrs = [], cuda_hdrs = [], deps = [], visibility = None):
    """A cc_library whose implementation is compiled by nvcc.

    Args:
      name: target name.
      srcs: .cu files.
      hdrs: public headers (plain C++ headers, usable from host code).
      cuda_hdrs: further headers (.cuh) the .cu files include, from any package.
      deps: cc_library deps of the public headers (header-only use from nvcc).
      visibility: of the library.
    """
    lib = "lib%s_cu.a" % name
    native.genrule(
        name = name + "_nvcc",
        srcs = srcs + hdrs + cuda_hdrs,
        outs = [lib],
        cmd = ("objs=; for f in %s; do o=$(@D)/$$(basename $$f .cu).%s.o; " +
               "%s %s -c $$f -o $$o || exit 1; objs=\"$$objs $$o\"; done; " +
               "%s -lib -o $@ $$objs") % (
            " ".join(["$(location %s)" % s for s in srcs]),
            name,
            NVCC,
            NVCC_FLAGS,
            NVCC,
        ),
        message = "nvcc %s" % name,
    )
    native.cc_import(
        name = name + "_import",
        static_library = lib,
        alwayslink = 1,
    )
    native.cc_library(
        name = name,
        hdrs = hdrs,
        deps = deps + [name + "_import", "@system_cuda//:lib"],
        visibility = visibility,
    )
