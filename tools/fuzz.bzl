"""libFuzzer targets (docs/testing.md, "Sanitizers and fuzzing").

rankd_fuzzer(name = "x_fuzzer", ...) defines:
  x_fuzzer              the fuzzer. Under --config=fuzz (clang-14, ASan +
                        UBSan + coverage) it links libFuzzer's main; in every
                        other configuration it links //tests/fuzz:replay_main,
                        which runs the inputs it is given once each, so the
                        code stays compiled and testable with gcc too.
  x_fuzzer_corpus_test  runs the fuzzer over its committed seed corpus
                        (tests/fuzz/corpus/x_fuzzer/) once: a regression test
                        of every seed and of every crash found and fixed
                        (a fixed crash input is added to the corpus). Runs
                        under `bazel test //...` and under --config=asan.
"""

def rankd_fuzzer(name, srcs, deps = []):
    native.cc_binary(
        name = name,
        testonly = True,
        srcs = srcs,
        deps = deps + select({
            "//tools:fuzzing": [],
            "//conditions:default": ["//tests/fuzz:replay_main"],
        }),
        linkopts = select({
            "//tools:fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
    )
    corpus = "corpus/%s" % name
    native.sh_test(
        name = name + "_corpus_test",
        srcs = ["//tests/fuzz:replay_corpus.sh"],
        args = ["$(rootpath :%s)" % name, native.package_name() + "/" + corpus],
        data = [":" + name] + native.glob([corpus + "/**"]),
    )
