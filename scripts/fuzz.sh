#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, --config=fuzz: clang-14, ASan +
# UBSan) and runs each for a while. CI runs every target for 60 s
# (scripts/test.sh); long campaigns run the same way in the background:
#   scripts/fuzz.sh --seconds 3600 --jobs 1 > /tmp/fuzz.log 2>&1 &
#
# Everything a campaign writes lives outside the repository, under --out
# (default ~/.cache/rankd/fuzz): the growing corpus per target (seeded from
# tests/fuzz/corpus/<target>/, which stays as committed), crash / leak /
# timeout inputs under artifacts/<target>/, each run's log, and one line per
# run in executions.tsv (date, target, seconds, executions, result,
# processes) to add up
# executions over campaigns. A crash input worth keeping as a regression
# goes into tests/fuzz/corpus/<target>/ once fixed (its _corpus_test then
# replays it in every test run).
#
# Prints per target "fuzz <target>: PASS|FAIL <executions> execs in <s> s
# (<rate>/s)", then "fuzz: N passed, N failed". Exits 1 when a target found
# something (or did not build / run).
#
# Options: --seconds N (per target; default 60), --jobs N (targets fuzzed at
# once; default 1), --procs N (processes per target, sharing its corpus
# directory, executions added up; default 1), --out DIR, --targets "a b"
# (default: all *_fuzzer targets), --no-build, --bin_dir DIR (where the
# *_fuzzer binaries are; default Bazel's fuzz output; implies --no-build),
# --runner CMD (prefix for each binary, e.g. a GPU bundle's `run`, which is
# then given the target's name instead of its path).
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=60
jobs=1
out="${HOME}/.cache/rankd/fuzz"
targets=""
build=1
procs=1
bin_dir=""
runner=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --procs) procs="$2"; shift 2 ;;
    --bin_dir) bin_dir="$2"; build=0; shift 2 ;;
    --runner) runner="$2"; build=0; shift 2 ;;
    *) echo "usage: $0 [--seconds N] [--jobs N] [--procs N] [--out DIR] [--targets \"a b\"] [--no-build] [--bin_dir DIR] [--runner CMD]" >&2; exit 2 ;;
  esac
done
for n in "$seconds" "$jobs" "$procs"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "$0: --seconds, --jobs and --procs take a whole number >= 1, got \"$n\"" >&2; exit 2; }
done
[[ -n "$targets" ]] || targets=$(cd tests/fuzz && ls -- *_fuzzer.cc | sed 's/\.cc$//')

if [[ "$build" -eq 1 ]]; then
  labels=()
  for t in $targets; do labels+=("//tests/fuzz:$t"); done
  if ! bazel build --config=fuzz --jobs=2 "${labels[@]}"; then
    for t in $targets; do echo "fuzz $t: FAIL (build)"; done
    echo "fuzz: 0 passed, $(echo $targets | wc -w) failed"
    exit 1
  fi
fi
# The fuzz configuration's own output directory (.bazelrc: --platform_suffix);
# not `bazel info`, which would wait for any bazel command in progress.
[[ -n "$bin_dir" ]] || bin_dir="bazel-out/k8-opt-fuzz/bin/tests/fuzz"
seeds="$PWD/tests/fuzz/corpus"

# fuzz_one TARGET: one campaign; writes its verdict to $out/<target>.result.
fuzz_one() {
  local t="$1" work="$out/corpus/$1" art="$out/artifacts/$1/" log
  mkdir -p "$work" "$art" "$out/logs"
  local stamp p rc=0 execs=0 e cmd
  stamp=$(date -u +%Y%m%dT%H%M%SZ)
  if [[ -n "$runner" ]]; then cmd=($runner "$t"); else cmd=("$bin_dir/$t"); fi
  # -timeout: one input over 10 s is a hang; -rss_limit_mb: 2 GiB is a leak
  # or an unbounded allocation (inputs are at most -max_len bytes). Several
  # processes share $work (new inputs are files named by their hash) and
  # each reloads what the others add (-reload, libFuzzer's default).
  local pids=()
  for ((p = 0; p < procs; p++)); do
    log="$out/logs/$t.$stamp.$p.log"
    "${cmd[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$art" \
      -seed=$((RANDOM * 32768 + RANDOM + p + 1)) \
      "$work" "$seeds/$t" >"$log" 2>&1 &
    pids+=($!)
  done
  for p in "${!pids[@]}"; do
    wait "${pids[$p]}" || rc=$?
    e=$(awk '/stat::number_of_executed_units:/{print $2}' "$out/logs/$t.$stamp.$p.log" | tail -1)
    execs=$((execs + ${e:-0}))
  done
  log="$out/logs/$t.$stamp.*.log"
  local verdict=PASS
  [[ "$rc" -eq 0 ]] || verdict=FAIL
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%F)" "$t" "$seconds" "$execs" "$verdict" "$procs" \
    >>"$out/executions.tsv"
  local rate=$(( execs / seconds ))
  echo "fuzz $t: $verdict $execs execs in $seconds s (${rate}/s), log $log" >"$out/$t.result"
  if [[ "$verdict" == FAIL ]]; then
    { echo "--- $t (exit $rc): tails of $log"; tail -n 40 $log; } >>"$out/$t.result"
  fi
}

mkdir -p "$out"
running=0
for t in $targets; do
  rm -f "$out/$t.result"
  fuzz_one "$t" &
  running=$((running + 1))
  if [[ "$running" -ge "$jobs" ]]; then wait -n; running=$((running - 1)); fi
done
wait

passed=0
failed=0
for t in $targets; do
  if [[ -f "$out/$t.result" ]]; then
    cat "$out/$t.result"
    if head -1 "$out/$t.result" | grep -q ": PASS "; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  else
    echo "fuzz $t: FAIL (no result)"
    failed=$((failed + 1))
  fi
done
echo "fuzz: $passed passed, $failed failed"
[[ "$failed" -eq 0 ]]
