#!/bin/bash
# End to end (CPU backend): ten consecutive new versions under load leak
# nothing. rankd serves mini version 1 in poll mode under an open-loop load;
# versions 2..11 are published one after another, each waited for until it is
# READY and its predecessor UNLOADED. The server's RSS at the end must be
# within 10% of its RSS with one version under the same load (measured after
# each swap too, to show the trend); no call may fail. Where the bound sits:
# a mini version that is never freed keeps its threads and its 2 MiB-aligned
# table mappings, a few MiB of RSS, so one such version out of ten is
# already about +20% and all ten +200%; the allocator's own retention is a
# few percent (docs/testing.md, "Flaky tests").
source "$(dirname "$0")/lib.sh"
RANKLOAD="$E2E_ROOT/loadtest/rankload"
[[ -x "$RANKLOAD" ]] || RANKLOAD="$E2E_ROOT/bazel-bin/loadtest/rankload"

MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini --seed 1
for v in $(seq 2 11); do
  run_bounded 120 "$RANKD" gen-model --preset mini --name mini --seed "$v" --out "$TMP/stage/$v" \
    2>"$TMP/gen.err" || die "gen-model v$v: $(cat "$TMP/gen.err")"
done
start_rankd "$MODELS" --model_control poll --repository_poll_s 0.2 --admin_port 0 --workers 1
admin_stubs "$TMP/admin_stubs"
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$RANKD_PID/status"; }

run_bounded 120 "$RANKLOAD" --target "$TARGET" --model mini --mode open --rate 200 \
  --duration_s 40 --warmup_s 0 --deadline_ms 5000 --quiet \
  --response_log "$TMP/responses.csv" >"$TMP/rankload.out" 2>&1 &
LOAD_PID=$!
track_pid "$LOAD_PID"
sleep 3
BASE=$(rss_kib)
for v in $(seq 2 11); do
  mv "$TMP/stage/$v" "$MODELS/mini/.$v.tmp"
  mv "$MODELS/mini/.$v.tmp" "$MODELS/mini/$v"
  lifecycle wait --target "$ADMIN_TARGET" --model mini --version "$v" --state READY \
    --timeout_s 60 >/dev/null || die "version $v never became READY"
  lifecycle wait --target "$ADMIN_TARGET" --model mini --version $((v - 1)) --state UNLOADED \
    --timeout_s 60 >/dev/null || die "version $((v - 1)) was never unloaded"
  rm -rf "$MODELS/mini/$((v - 1))"
  sleep 0.5
  RSS[$v]=$(rss_kib)
done
sleep 1
END_RSS=$(rss_kib)
wait "$LOAD_PID" || fail "rankload: $(tail -3 "$TMP/rankload.out")"
log "RSS KiB: one version $BASE; after each swap: ${RSS[*]}; end $END_RSS"
"$PY" - "$TMP/responses.csv" <<'PYEOF' || fail "calls failed during the swaps"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
bad = [r for r in rows if r["code"] != "OK"]
versions = sorted({int(r["version"]) for r in rows if r["code"] == "OK"})
print("%d calls, %d failed, versions %s" % (len(rows), len(bad), versions), file=sys.stderr)
assert not bad and len(rows) > 500 and versions[-1] == 11, bad[:3]
PYEOF
LIMIT=$((BASE + BASE / 10))
[[ "$END_RSS" -le "$LIMIT" ]] ||
  fail "RSS grew: $END_RSS KiB after ten swaps, one-version level $BASE KiB (limit +10%: $LIMIT)"
stop_rankd TERM
expect_eq "rankd exit status" "$RANKD_RC" 0
finish
