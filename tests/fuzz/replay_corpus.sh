#!/usr/bin/env bash
# replay_corpus.sh FUZZER CORPUS_DIR: runs the fuzzer once over every input
# of its seed corpus (tools/fuzz.bzl). With libFuzzer (--config=fuzz),
# -runs=0 executes the corpus and exits; the replay main ignores the flag.
set -euo pipefail
fuzzer="$1"
corpus="$2"
n=$(find -L "$corpus" -type f | wc -l)
[[ "$n" -gt 0 ]] || { echo "no seed inputs in $corpus" >&2; exit 1; }
echo "replaying $n inputs from $corpus"
exec "$fuzzer" -runs=0 "$corpus"
