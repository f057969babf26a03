"""Debian system libraries as Bazel repositories, through pkg-config.

Each repository exposes one `cc_library` named `lib`. `-D` flags become
`defines`, `-I` directories are linked into the repository and exported as
`includes` (so dependants compile with them), and `--libs` become `linkopts`.
Nothing is downloaded: a missing package fails here with pkg-config's message,
which names the package (scripts/setup.sh installs them all).
"""

def _pkg_config_impl(ctx):
    pkg_config = ctx.which("pkg-config")
    if pkg_config == None:
        fail("pkg-config not found: run scripts/setup.sh")
    modules = ctx.attr.modules
    defines = []
    includes = []
    copts = []
    linkopts = []
    if modules:
        cflags = ctx.execute([pkg_config, "--cflags"] + modules)
        if cflags.return_code != 0:
            fail("pkg-config --cflags %s failed: %s (run scripts/setup.sh)" % (" ".join(modules), cflags.stderr))
        libs = ctx.execute([pkg_config, "--libs"] + modules)
        if libs.return_code != 0:
            fail("pkg-config --libs %s failed: %s" % (" ".join(modules), libs.stderr))
        for flag in cflags.stdout.strip().split(" "):
            if flag.startswith("-D"):
                defines.append(flag[2:])
            elif flag.startswith("-I"):
                target = "include_%d" % len(includes)
                ctx.symlink(flag[2:], target)
                includes.append(target)
            elif flag:
                copts.append(flag)
        seen = {}
        for flag in libs.stdout.strip().split(" "):
            if flag and flag not in seen:
                seen[flag] = True
                linkopts.append(flag)
    for d in ctx.attr.include_dirs:
        target = "include_%d" % len(includes)
        ctx.symlink(d, target)
        includes.append(target)
    linkopts = linkopts + ctx.attr.extra_linkopts
    if "-pthread" in copts and "-pthread" not in linkopts:
        linkopts.append("-pthread")
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "lib",
    hdrs = glob([{hdr_globs}], exclude = ["include_*/cccl/**"], allow_empty = True),
    includes = {includes},
    defines = {defines},
    linkopts = {linkopts},
)
""".format(
        hdr_globs = ", ".join(['"%s/**"' % i for i in includes]),
        includes = repr(includes),
        defines = repr(defines),
        linkopts = repr(linkopts),
    ))

pkg_config_repo = repository_rule(
    implementation = _pkg_config_impl,
    attrs = {
        "modules": attr.string_list(),
        "extra_linkopts": attr.string_list(),
        # Extra include directories (absolute), exported like pkg-config's -I.
        "include_dirs": attr.string_list(),
    },
    local = True,
)

_ABSL = [
    "absl_base",
    "absl_status",
    "absl_statusor",
    "absl_strings",
    "absl_str_format",
    "absl_synchronization",
    "absl_time",
    "absl_flags",
    "absl_flags_parse",
    "absl_flags_usage",
    "absl_hash",
    "absl_raw_hash_set",
    "absl_random_random",
    "absl_span",
    "absl_cleanup",
]

def system_libs():
    pkg_config_repo(name = "system_absl", modules = _ABSL)
    pkg_config_repo(name = "system_protobuf", modules = ["protobuf"])
    pkg_config_repo(
        name = "system_grpc",
        modules = ["grpc++"],
        # grpc++.pc brings neither protobuf nor the reflection library.
        extra_linkopts = ["-lgrpc++_reflection", "-lprotobuf"],
    )
    pkg_config_repo(name = "system_spdlog", modules = ["spdlog", "fmt"])
    pkg_config_repo(name = "system_prometheus", modules = ["prometheus-cpp-pull", "prometheus-cpp-core"])
    pkg_config_repo(name = "system_gtest", modules = ["gtest", "gmock", "gmock_main"])
    pkg_config_repo(name = "system_gtest_nomain", modules = ["gtest", "gmock"])
    # There is no benchmark_main.pc.
    pkg_config_repo(name = "system_benchmark", modules = ["benchmark"], extra_linkopts = ["-lbenchmark_main"])
    pkg_config_repo(name = "system_eigen", modules = ["eigen3"])
    pkg_config_repo(name = "system_json", modules = ["nlohmann_json"])
    # TLS files are checked at start (key matches certificate) with OpenSSL,
    # the library gRPC itself uses on Debian.
    pkg_config_repo(name = "system_openssl", modules = ["openssl"])
    # The HTTP listener (server/http/): Debian builds cpp-httplib as a shared
    # library with OpenSSL, zlib and brotli; its .pc gives the matching -D flags.
    pkg_config_repo(name = "system_httplib", modules = ["cpp-httplib"])
    pkg_config_repo(
        name = "system_cuda",
        modules = [],
        # Host code that includes CUDA headers (cuda_runtime_api.h; cuda_fp16.h
        # needs <nv/target> from cccl/). The cccl/ copy under include/ is left
        # out of the header glob so each header is declared once.
        include_dirs = ["/usr/local/cuda/include", "/usr/local/cuda/include/cccl"],
        # Static cudart so binaries run on GPU machines without a CUDA install.
        extra_linkopts = ["-L/usr/local/cuda/lib64", "-lcudart_static", "-ldl", "-lrt", "-lpthread"],
    )
