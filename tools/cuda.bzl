"""CUDA (.cu) libraries built with nvcc.

nvcc compiles the sources into a static library (-fPIC: tests link shared),
which a cc_import with alwayslink wraps. Host code that only includes the
library's headers needs no CUDA headers unless those headers include them.

Architectures: the default (developer and CI) build holds sm_90 code plus
compute_90 PTX (H100 / H200 run the cubin; a newer GPU JIT-compiles the PTX
at first use). `--config=portable` (.bazelrc) builds cubins for every GPU
generation rankd supports plus PTX of the newest, for images and releases;
nvcc then takes about five times longer. tools/fatbin_archs.py lists what a
binary holds.
"""

NVCC = "/usr/local/cuda/bin/nvcc"

NVCC_FLAGS = " ".join([
    "-std=c++17",
    "-O3",
    "-Xcompiler -fPIC",
    "-lineinfo",
    "-I.",
])

ARCH_FLAGS_DEFAULT = "-gencode=arch=compute_90,code=[sm_90,compute_90]"

# The portable build: cubins for A100 (sm_80), A10 / A40 (sm_86), L4 / L40S
# (sm_89), H100 / H200 (sm_90) and B200 (sm_100), and sm_100 PTX for anything
# newer. sm_86 and sm_89 are compiled from compute_80: rankd's kernels use no
# instruction those two added, and each virtual architecture costs a full
# front-end (cicc) pass, the slow part of nvcc.
ARCH_FLAGS_PORTABLE = " ".join([
    "-gencode=arch=compute_80,code=[sm_80,sm_86,sm_89]",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_100,code=[sm_100,compute_100]",
])

def arch_flags(archs = None):
    """nvcc -gencode flags: `archs` "default" / "portable", or None = by config."""
    if archs == "portable":
        return ARCH_FLAGS_PORTABLE
    if archs == "default":
        return ARCH_FLAGS_DEFAULT
    return select({
        "//tools:portable_cuda": ARCH_FLAGS_PORTABLE,
        "//conditions:default": ARCH_FLAGS_DEFAULT,
    })

def cuda_library(name, srcs, hdrs = [], cuda_hdrs = [], deps = [], visibility = None, archs = None):
    """A cc_library whose implementation is compiled by nvcc.

    Args:
      name: target name.
      srcs: .cu files.
      hdrs: public headers (plain C++ headers, usable from host code).
      cuda_hdrs: further headers (.cuh) the .cu files include, from any package.
      deps: cc_library deps of the public headers (header-only use from nvcc).
      visibility: of the library.
      archs: "default" or "portable" to fix the architectures; None (the
        default) follows --config=portable.
    """
    lib = "lib%s_cu.a" % name
    native.genrule(
        name = name + "_nvcc",
        srcs = srcs + hdrs + cuda_hdrs,
        outs = [lib],
        cmd = ("objs=; for f in %s; do o=$(@D)/$$(basename $$f .cu).%s.o; " +
               "%s %s ") % (
            " ".join(["$(location %s)" % s for s in srcs]),
            name,
            NVCC,
            NVCC_FLAGS,
        ) + arch_flags(archs) + (" -c $$f -o $$o || exit 1; objs=\"$$objs $$o\"; done; " +
                                 "%s -lib -o $@ $$objs") % NVCC,
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
