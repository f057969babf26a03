# Helpers of the rankload end-to-end tests (tests/e2e/rankload_*_test.sh),
# sourced after lib.sh:
#   RANKLOAD            the rankload binary
#   rankload ARGS...    rankload against the started server, bounded
#   rj FILE EXPR        evaluates the Python expression EXPR with r = the JSON
#                       report in FILE and prints it ("" and a failure on error)
#   within NAME GOT WANT REL   checks |GOT - WANT| <= REL * WANT
#   at_least / below NAME GOT BOUND
#   mixed_requests MODEL_DIR SED   writes $TMP/good.jsonl (60 valid mini requests
#                       of 4 candidates) and $TMP/mixed.jsonl: those, 3 for an
#                       unknown model ("nope": NOT_FOUND) and 2 of the first
#                       made INVALID_ARGUMENT by the sed expression SED
if [[ -x "$E2E_ROOT/loadtest/rankload" ]]; then
  RANKLOAD="$E2E_ROOT/loadtest/rankload"
else
  RANKLOAD="$E2E_ROOT/bazel-bin/loadtest/rankload"
fi

rankload() {
  run_bounded 300 "$RANKLOAD" --target "$TARGET" --connect_timeout_ms 10000 "$@"
}

rj() {
  local out
  if ! out="$("$PY" -c '
import json, sys
r = json.load(open(sys.argv[1]))
def intervals(step):  # the measured intervals of a step
    return [i for i in r["steps"][step]["intervals"] if not i["warmup"]]
print(eval(sys.argv[2]))' "$1" "$2" 2>&1)"; then
    fail "rj $(basename "$1") '$2': $out"
    echo ""
    return
  fi
  echo "$out"
}

_cmp() {  # NAME GOT OP BOUND
  "$PY" -c 'import sys; g, b = float(sys.argv[1]), float(sys.argv[3]); sys.exit(0 if eval("g " + sys.argv[2] + " b") else 1)' \
    "$2" "$3" "$4" 2>/dev/null || fail "$1: got '$2', want $3 $4"
}

within() {
  "$PY" -c 'import sys; g, w, r = map(float, sys.argv[1:4]); sys.exit(0 if abs(g - w) <= r * w else 1)' \
    "$2" "$3" "$4" 2>/dev/null || fail "$1: got '$2', want $3 within $(awk -v r="$4" 'BEGIN{print r*100}')%"
}
at_least() { _cmp "$1" "$2" ">=" "$3"; }
below() { _cmp "$1" "$2" "<" "$3"; }

mixed_requests() {
  gen_requests "$1" "$TMP/good.jsonl" --count 60 --candidates 4 --seed 5
  {
    cat "$TMP/good.jsonl"
    head -n 3 "$TMP/good.jsonl" | sed 's/"model":"mini"/"model":"nope"/'
    head -n 2 "$TMP/good.jsonl" | sed "$2"
  } >"$TMP/mixed.jsonl"
}
