#!/bin/bash
# End to end: a loaded version never depends on its files again. With a
# version serving, its weights file is truncated, then overwritten with other
# weights of the same size, then its directory is deleted; after each step
# the server answers the same scores, bit for bit, as `rankd score` gave on
# the original files (before, truncation killed the server with SIGBUS and a
# same-size overwrite silently changed its scores).
source "$(dirname "$0")/lib.sh"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini --seed 1 --dynamic_tables 1
run_bounded 120 "$RANKD" gen-model --preset mini --name mini --seed 9 --dynamic_tables 1 \
  --out "$TMP/other" 2>"$TMP/gen2.err" || die "gen-model: $(cat "$TMP/gen2.err")"
W="$MODELS/mini/1/weights.safetensors"
[[ "$(stat -c %s "$W")" == "$(stat -c %s "$TMP/other/weights.safetensors")" ]] ||
  die "the two models' weights differ in size"
gen_requests "$MODELS/mini/1" "$TMP/req.jsonl" --count 20 --candidates 8 --seed 3
reference_scores "$MODELS/mini/1" "$TMP/req.jsonl" "$TMP/want.jsonl"

# none: nothing follows the repository, so only the files change under it.
start_rankd "$MODELS" --model_control none

check() {
  rankctl score --input "$TMP/req.jsonl" --output "$TMP/got.$1.jsonl" 2>"$TMP/score.$1.err" ||
    fail "$1: rankctl score: $(cat "$TMP/score.$1.err")"
  compare_scores "scores after $1" "$TMP/want.jsonl" "$TMP/got.$1.jsonl"
  kill -0 "$RANKD_PID" 2>/dev/null || die "rankd died after $1"
}
check "load"
truncate -s 0 "$W"
check "truncation"
cp "$TMP/other/weights.safetensors" "$W.new"
truncate -s 0 "$W"
cat "$W.new" >"$W"   # same inode, same size, other bytes
cmp -s "$W" "$TMP/other/weights.safetensors" || die "overwrite did not take"
check "same-size overwrite"
rm -rf "$MODELS/mini/1"
check "deletion"

stop_rankd TERM
expect_eq "rankd exit status" "$RANKD_RC" 0
finish
