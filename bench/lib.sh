# Shared by the measurement scripts bench/host_path.sh, slo_report.sh,
# soak_overload.sh and protocols.sh (sourced, never run): their command line,
# bundled binaries' libraries, a work directory cleaned up on exit, progress
# lines, and one `rankd serve` started in the background and waited for.
#
# The sourcing script sets `bench_name` (its name, for messages) first.

# bench_print_header LAST: the script's header comment (lines 2 to LAST)
# without its "# ", for its `usage`.
bench_print_header() {
  sed -n "2,${1}p" "$0" | sed 's/^# \{0,1\}//'
}

# bench_usage_error TEXT: exits 2 with TEXT, pointing to --help.
bench_usage_error() {
  echo "$bench_name: $* (see --help)" >&2
  exit 2
}

# bench_parse_options SPEC ARGS...: the script's command line. SPEC lists its
# options, one word each: "name" (--name VALUE sets $name) or "name:var"
# (--name VALUE sets $var); --name=VALUE works too. -h / --help runs the
# script's `usage` function and exits 0; an unknown option, a bare argument
# or an option without its value exits 2 naming it.
bench_parse_options() {
  local spec=$1 opt var entry
  shift
  while [ $# -gt 0 ]; do
    opt=$1
    case $opt in
      -h|--help) usage; exit 0 ;;
      --*=*) set -- "${opt%%=*}" "${opt#*=}" "${@:2}"; continue ;;
      --*) ;;
      *) bench_usage_error "unexpected argument \"$opt\"" ;;
    esac
    var=""
    for entry in $spec; do
      if [ "${entry%%:*}" = "${opt#--}" ]; then var=${entry#*:}; break; fi
    done
    [ -n "$var" ] || bench_usage_error "unknown option $opt"
    [ $# -ge 2 ] || bench_usage_error "$opt: needs a value"
    printf -v "$var" '%s' "$2"
    shift 2
  done
}

# bench_require_binaries RANKD RANKLOAD [OUT]: the options every script needs:
# --rankd and --rankload executables and (when the script takes it) --out.
bench_require_binaries() {
  [ -n "$1" ] || bench_usage_error "--rankd: required"
  [ -n "$2" ] || bench_usage_error "--rankload: required"
  if [ $# -ge 3 ]; then [ -n "$3" ] || bench_usage_error "--out: required"; fi
  [ -x "$1" ] || bench_usage_error "--rankd: $1 is not an executable"
  [ -x "$2" ] || bench_usage_error "--rankload: $2 is not an executable"
}

# bench_positive_int OPTION VALUE: exits 2 naming OPTION unless VALUE is a
# positive integer.
bench_positive_int() {
  [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "$bench_name: $1: a positive integer, got \"$2\"" >&2; exit 2; }
}

# bench_check_backend VALUE: exits 2 unless VALUE is a rankd serve --backend.
bench_check_backend() {
  case $1 in
    cuda|cpu|auto) ;;
    *) echo "$bench_name: --backend: cpu, cuda or auto, got $1" >&2; exit 2 ;;
  esac
}

# bench_binaries VAR...: the binaries named by these variables (empty ones
# skipped) find their bundle's libraries (bench_use_bundle) and each
# variable is made an absolute path.
bench_binaries() {
  local var
  for var in "$@"; do
    local -n bin_path=$var
    if [ -n "$bin_path" ]; then
      bench_use_bundle "$bin_path"
      bin_path=$(bench_abs "$bin_path")
    fi
    unset -n bin_path
  done
}

# bench_use_bundle BIN...: binaries from a bundle (scripts/gpu_bundle.sh:
# BUNDLE/bin/<binary> with BUNDLE/lib) find their libraries.
bench_use_bundle() {
  local b lib
  for b in "$@"; do
    lib=$(cd "$(dirname "$b")/.." && pwd)/lib
    if [ -d "$lib" ]; then export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
  done
}

# bench_abs PATH: PATH made absolute (its directory must exist).
bench_abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }

# bench_dirs OUT WORK: creates OUT and WORK (a temporary directory when WORK
# is empty, removed on exit) and makes both absolute in $out and $work; arms
# the exit trap that also stops the server started by bench_start_rankd.
bench_dirs() {
  mkdir -p "$1"
  out=$(cd "$1" && pwd)
  bench_own_work=0
  work=$2
  if [ -z "$work" ]; then work=$(mktemp -d); bench_own_work=1; fi
  mkdir -p "$work"
  work=$(cd "$work" && pwd)
  pid=""
  trap bench_cleanup EXIT
  bench_t0=$SECONDS
}

bench_cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  if [ "${bench_own_work:-0}" = 1 ]; then rm -rf "$work"; fi
}

# bench_pin ARRAY OPTION LIST: sets the array named ARRAY to (taskset -c LIST),
# or to () when LIST is empty; exits 2 naming OPTION when LIST is not a CPU
# list of this machine or taskset is missing.
bench_pin() {
  local -n pin_array=$1
  pin_array=()
  [ -z "$3" ] && return 0
  command -v taskset >/dev/null ||
    { echo "$bench_name: $2 needs taskset (util-linux)" >&2; exit 2; }
  taskset -c "$3" true 2>/dev/null ||
    { echo "$bench_name: $2: \"$3\" is not a CPU list of this machine (taskset -c)" >&2; exit 2; }
  pin_array=(taskset -c "$3")
}

say() { echo "[$bench_name +$((SECONDS - bench_t0))s] $*" >&2; }

# bench_start_rankd LOG PORTS CMD...: runs CMD (a `rankd serve` with
# --port_file PORTS, possibly behind taskset) in the background with its
# output in LOG, waits up to 180 s (loading + warm-up) for the port file, and
# sets $pid, $grpc (gRPC port) and $metrics (metrics port). Exits 1, with the
# log's tail, when the server dies or never serves.
bench_start_rankd() {
  local log=$1 ports=$2
  shift 2
  rm -f "$ports"
  "$@" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 1800); do
    [ -s "$ports" ] && break
    kill -0 "$pid" 2>/dev/null || { echo "$bench_name: rankd exited:" >&2; tail -20 "$log" >&2; exit 1; }
    sleep 0.1
  done
  [ -s "$ports" ] || { echo "$bench_name: rankd not serving after 180 s" >&2; tail -20 "$log" >&2; exit 1; }
  grpc=$(sed -n 's/^grpc_port=//p' "$ports")
  metrics=$(sed -n 's/^metrics_port=//p' "$ports")
  say "rankd $pid serving on 127.0.0.1:$grpc (metrics $metrics)"
}
