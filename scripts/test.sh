#!/usr/bin/env bash
# The test suite: installs what is missing, builds everything and runs every
# Bazel test (unit, integration, end-to-end). With CI set (CI=true, as
# .ci/run runs it) or --sanitizers, it then also runs (docs/testing.md):
#   asan  every non-GPU test under --config=asan (ASan + UBSan, clang-14);
#         its clang build is also the -Wthread-safety -Werror build
#   tsan  the concurrent tests under --config=tsan (TSAN_TESTS below), linked
#         to ThreadSanitizer-built abseil (scripts/tsan_abseil.sh)
#   fuzz  each libFuzzer target for 60 s (scripts/fuzz.sh)
#   cpu-build  the --config=cpu build with /usr/local/cuda hidden
#         (scripts/cpu_build_check.sh)
#   image the CPU container image from those binaries, built with podman and
#         smoke-tested (scripts/build_image.sh)
# Every run also has the house stage: scripts/check_house.py (function
# length, layering, paths, bench/results' size) after the Bazel tests.
# Ends with the line "N passed, N failed": one entry per Bazel test result
# of each stage (a test counts once per stage it runs in) and one per fuzz
# target. Each stage's wall time is printed as "stage <name>: <s> s".
# Usage: scripts/test.sh [--sanitizers] [extra bazel test args]
set -uo pipefail
cd "$(dirname "$0")/.."

sanitizers=0
[[ -n "${CI:-}" && "${CI}" != "false" && "${CI}" != "0" ]] && sanitizers=1
if [[ "${1:-}" == "--sanitizers" ]]; then sanitizers=1; shift; fi

bash scripts/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

# 2-core machines: two compiles at a time keeps memory in check and leaves
# the other core's share to whatever else runs.
jobs_flag=(--jobs=2)
[ -n "${CI:-}" ] && jobs_flag+=(--local_ram_resources=HOST_RAM*.6)

# The concurrent parts run under TSan: batcher, model instance, completion
# executor, the CPU engine's pool, the CUDA workers' packing pool, live
# tables (the NoTornRows update stress test) and their idle-priority staging
# thread, and the model manager. Not the server end-to-end tests:
# Debian's gRPC is not instrumented, and TSan then reports races inside
# gRPC (its recvmsg / memcpy / free against its own lock-free hand-offs,
# which TSan cannot see) that only broad suppressions would silence, and
# those would hide races in rankd's handlers too (docs/testing.md).
TSAN_TESTS=(
  //engine/serving:dynamic_batcher_test
  //engine/serving:model_instance_test
  //engine/serving:completion_executor_test
  //engine/cpu:cpu_engine_test
  //engine/cuda:pack_pool_test
  //engine/updates:live_tables_test
  //engine/updates:idle_priority_runner_test
  //server/lifecycle:model_manager_test
  //server:message_pool_test
  //server/http:connection_threads_test
)

total_passed=0
total_failed=0

# Time budget of the sanitizer stages. CI's machine has 2 cores and stops the
# suite at 90 minutes; the suite should take at most 60 there. A stage starts
# only while at least its share of the budget is left: asan (a second build of
# every C++ file, with clang, and every test again) needs about 30 minutes,
# tsan (abseil for TSan once, then ten tests) about 10, fuzz (a build and seven
# 60 s runs) about 10. A stage that does not fit is reported as not run, by
# name, and counted neither way. A sanitizer stage still running 15 minutes
# past the budget is stopped (Bazel interrupted): what it finished counts,
# tests it did not get to count neither way, and the line says so, so that a
# slow runner never reaches CI's hard limit. `scripts/test.sh --sanitizers`
# with RANKD_TEST_BUDGET_S=0 (no budget) runs every stage to its end.
budget_s=${RANKD_TEST_BUDGET_S:-3600}
if ! [[ "$budget_s" =~ ^[0-9]+$ ]]; then
  echo "RANKD_TEST_BUDGET_S: seconds as a whole number >= 0 (0 = no budget), got \"$budget_s\""
  echo "0 passed, 1 failed"
  exit 2
fi
suite_start=0  # SECONDS counts from this script's start: setup included
stop_at=$((budget_s + 900))
# fits NAME NEEDED_S: true when the stage may start.
fits() {
  local spent=$((SECONDS - suite_start))
  if [[ "$budget_s" -gt 0 && $((spent + $2)) -gt "$budget_s" ]]; then
    echo "stage $1: NOT RUN: ${spent} s of the suite's ${budget_s} s budget spent, the stage needs about $2 s (RANKD_TEST_BUDGET_S=0 runs it)"
    return 1
  fi
  return 0
}

# bazel_stage NAME LIMITED ARGS...: one `bazel test` run, counted. LIMITED=1:
# interrupted at the hard stop (above) when there is a budget.
bazel_stage() {
  local name="$1" limited="$2" log start rc passed failed limit=()
  shift 2
  if [[ "$limited" -eq 1 && "$budget_s" -gt 0 ]]; then
    limit=(timeout --signal=INT --kill-after=120 $((stop_at > SECONDS ? stop_at - SECONDS : 1)))
  fi
  log=$(mktemp)
  start=$SECONDS
  "${limit[@]}" bazel test --test_summary=short --test_output=errors "${jobs_flag[@]}" "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  # One summary line per test target: "//pkg:target  (cached) PASSED in 0.3s".
  passed=$(grep -cE '^//[^ ]+ +(\(cached\) +)?PASSED' "$log")
  if [[ "${#limit[@]}" -gt 0 && ( "$rc" -eq 124 || "$rc" -eq 137 ) ]]; then
    # Stopped at the hard limit: tests it did not finish (NO STATUS) are not
    # failures; a test that failed before the stop still is.
    failed=$(grep -cE '^//[^ ]+ +(\(cached\) +)?(FAILED|TIMEOUT|FLAKY|FAILED TO BUILD)' "$log")
    echo "stage $name: STOPPED at the suite's hard limit ($((stop_at)) s from its start; RANKD_TEST_BUDGET_S=0 runs it to its end):" \
      "$(grep -cE '^//[^ ]+ +NO STATUS' "$log") tests not finished"
  else
    failed=$(grep -cE '^//[^ ]+ +(\(cached\) +)?(FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE|FAILED TO BUILD)' "$log")
    if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
      failed=1  # the build itself failed before any test ran
    fi
  fi
  rm -f "$log"
  echo "stage $name: $((SECONDS - start)) s, $passed passed, $failed failed"
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
}

bazel_stage default 0 //... "$@"

# script_stage NAME COMMAND...: a stage run by a script whose last line is
# "<NAME>: PASS" (or "<NAME>: FAIL <why>"); one entry either way.
script_stage() {
  local name="$1" start=$SECONDS log rc
  shift
  log=$(mktemp)
  "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  if [[ "$rc" -eq 0 ]] && grep -q "^$name: PASS\$" "$log"; then
    total_passed=$((total_passed + 1))
    echo "stage $name: $((SECONDS - start)) s, 1 passed, 0 failed"
  else
    total_failed=$((total_failed + 1))
    echo "stage $name: $((SECONDS - start)) s, 0 passed, 1 failed (exit $rc)"
  fi
  rm -f "$log"
}

# The house rules on the tree: function length, server/ free of CUDA, no
# path outside the repository, bench/results' size (docs/testing.md).
script_stage house python3 scripts/check_house.py --self_test

# The CPU-only build with the CUDA toolkit hidden (docs/build.md); its
# binaries feed the image stage.
cpu_bin_dir="$(mktemp -d)"
trap 'rm -rf "$cpu_bin_dir"' EXIT
if [[ "$sanitizers" -eq 1 ]] && fits cpu-build 600; then
  script_stage cpu-build bash scripts/cpu_build_check.sh "$cpu_bin_dir"
fi
# The CPU container image from those binaries, smoke-tested (deploy/README.md);
# fails, naming why, where the machine cannot build or run containers.
if [[ "$sanitizers" -eq 1 ]] && fits image 600; then
  if [[ -x "$cpu_bin_dir/rankd" ]]; then
    script_stage image bash scripts/build_image.sh --bin_dir "$cpu_bin_dir" --timeout 900
  else
    echo "image: FAIL the cpu-build stage left no binaries"
    echo "stage image: 0 s, 0 passed, 1 failed"
    total_failed=$((total_failed + 1))
  fi
fi

if [[ "$sanitizers" -eq 1 ]] && fits asan 1800; then
  bazel_stage asan 1 --config=asan //... "$@"
fi

if [[ "$sanitizers" -eq 1 ]] && fits tsan 600; then
  start=$SECONDS
  if absl_lib=$(bash scripts/tsan_abseil.sh | tail -1); then
    echo "stage tsan-abseil: $((SECONDS - start)) s"
    # An RPATH (not RUNPATH, not LD_LIBRARY_PATH) on the tsan binaries: it
    # applies to the libraries they load too (gRPC's abseil), while the
    # Python clients of the e2e tests keep Debian's uninstrumented abseil
    # (instrumented .so files cannot load into a process without TSan).
    # Suppressions: abseil internals only (tools/sanitizers/tsan.supp).
    bazel_stage tsan 1 --config=tsan --linkopt=-Wl,--disable-new-dtags,-rpath,"$absl_lib" \
      --test_env=TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=4:suppressions=$PWD/tools/sanitizers/tsan.supp" \
      "${TSAN_TESTS[@]}"
  else
    echo "stage tsan: building abseil with TSan failed"
    total_failed=$((total_failed + 1))
  fi
fi

if [[ "$sanitizers" -eq 1 ]] && fits fuzz 600; then
  start=$SECONDS
  fuzz_log=$(mktemp)
  limit=()
  [[ "$budget_s" -gt 0 ]] && limit=(timeout --kill-after=60 $((stop_at > SECONDS ? stop_at - SECONDS : 1)))
  "${limit[@]}" bash scripts/fuzz.sh --seconds "${FUZZ_SECONDS:-60}" 2>&1 | tee "$fuzz_log"
  rc=${PIPESTATUS[0]}
  p=$(grep -cE '^fuzz [a-z_]+: PASS' "$fuzz_log")
  f=$(grep -cE '^fuzz [a-z_]+: FAIL' "$fuzz_log")
  if [[ "${#limit[@]}" -gt 0 && ( "$rc" -eq 124 || "$rc" -eq 137 ) ]]; then
    echo "stage fuzz: STOPPED at the suite's hard limit ($stop_at s from its start; RANKD_TEST_BUDGET_S=0 runs it to its end)"
  else
    [[ $((p + f)) -gt 0 ]] || f=1
  fi
  rm -f "$fuzz_log"
  echo "stage fuzz: $((SECONDS - start)) s, $p passed, $f failed"
  total_passed=$((total_passed + p))
  total_failed=$((total_failed + f))
fi

echo "${total_passed} passed, ${total_failed} failed"
[ "$total_failed" -eq 0 ]
