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
# run in executions.tsv (date, target, seconds, executions, result) to add up
# executions over campaigns. A crash input worth keeping as a regression
# goes into tests/fuzz/corpus/<target>/ once fixed (its _corpus_test then
# replays it in every test run).
#
# Prints per target "fuzz <target>: PASS|FAIL <executions> execs in <s> s
# (<rate>/s)", then "fuzz: N passed, N failed". Exits 1 when a target found
# something (or did not build / run).
#
# Options: --seconds N (per target; default 60), --jobs N (targets fuzzed at
# once, one process each; default 1), --out DIR, --targets "a b" (default:
# all *_fuzzer targets), --no-build.
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=60
jobs=1
out="${HOME}/.cache/rankd/fuzz"
targets=""
build=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "usage: $0 [--seconds N] [--jobs N] [--out DIR] [--targets \"a b\"] [--no-build]" >&2; exit 2 ;;
  esac
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
bin_dir="bazel-out/k8-opt-fuzz/bin/tests/fuzz"

# fuzz_one TARGET: one campaign; writes its verdict to $out/<target>.result.
fuzz_one() {
  local t="$1" work="$out/corpus/$1" art="$out/artifacts/$1/" log
  mkdir -p "$work" "$art" "$out/logs"
  log="$out/logs/$t.$(date -u +%Y%m%dT%H%M%SZ).log"
  # -timeout: one input over 10 s is a hang; -rss_limit_mb: 2 GiB is a leak
  # or an unbounded allocation (inputs are at most -max_len bytes).
  "$bin_dir/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$art" \
    "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1
  local rc=$?
  local execs
  execs=$(awk '/stat::number_of_executed_units:/{print $2}' "$log" | tail -1)
  execs="${execs:-0}"
  local verdict=PASS
  [[ "$rc" -eq 0 ]] || verdict=FAIL
  printf '%s\t%s\t%s\t%s\t%s\n' "$(date -u +%F)" "$t" "$seconds" "$execs" "$verdict" \
    >>"$out/executions.tsv"
  local rate=$(( execs / (seconds > 0 ? seconds : 1) ))
  echo "fuzz $t: $verdict $execs execs in $seconds s (${rate}/s), log $log" >"$out/$t.result"
  if [[ "$verdict" == FAIL ]]; then
    { echo "--- $t (exit $rc): tail of $log"; tail -n 40 "$log"; } >>"$out/$t.result"
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
