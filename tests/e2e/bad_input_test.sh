#!/bin/bash
# End to end: every class of bad ScoreRequest gets INVALID_ARGUMENT naming the
# field (unknown model / version: NOT_FOUND), each followed by a good request
# that must still be scored bit-exactly (the server keeps serving), and the
# server's rankd_requests_total counts exactly what was sent (and nothing bad
# was computed: rankd_candidates_total). Classes (e2e_util.py bad_requests):
# unknown feature, feature sent twice, missing feature, wrong lengths count,
# negative length, ids count != sum(lengths), weights count mismatch, dense
# count wrong, NaN dense ("NaN" in JSON), -Infinity dense, NaN weight,
# out-of-range id, num_candidates 0, num_candidates above --max_candidates;
# unknown model and unknown version -> NOT_FOUND. Checked through rankctl
# (stderr `file:line: CODE: message`) and through the Python client.
source "$(dirname "$0")/lib.sh"

MAX_CANDIDATES=100
MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
gen_requests "$MODELS/mini/1" "$TMP/good.jsonl" --count 1 --candidates 4 --bag_size 2 --seed 5
gen_requests "$MODELS/mini/1" "$TMP/big.jsonl" --count 1 --candidates $((MAX_CANDIDATES + 1)) --seed 6
reference_scores "$MODELS/mini/1" "$TMP/good.jsonl" "$TMP/good_want.jsonl"

"$PY" "$E2E_DIR/e2e_util.py" bad-requests --good "$TMP/good.jsonl" --big "$TMP/big.jsonl" \
  --num_dense 13 --interleave_good --output "$TMP/bad.jsonl" --cases "$TMP/cases.jsonl" ||
  die "cannot write the bad requests"
TOTAL=$(wc -l <"$TMP/cases.jsonl")
N_OK=$(grep -c '"code": "OK"' "$TMP/cases.jsonl")
N_INVALID=$(grep -c '"code": "INVALID_ARGUMENT"' "$TMP/cases.jsonl")
N_NOT_FOUND=$(grep -c '"code": "NOT_FOUND"' "$TMP/cases.jsonl")
expect_eq "bad request classes" "$N_INVALID" 14
expect_eq "NOT_FOUND classes" "$N_NOT_FOUND" 2

# Bad serve flags: refused at start, naming the flag, before anything loads.
for bad in "--worker_spin_us=-2" "--worker_spin_us=20000" "--completion_threads=-1" \
  "--host_staging_mib=-1" "--gpu_pack_threads=-2" "--gpu_pack_threads=65" "--gpu_cross_math=tf64" \
  "--rpc_threads=-2" "--rpc_threads=65" "--workers=100000" "--cpu_threads=100000" \
  "--completion_threads=100000" "--gpu_workers=100000"; do
  timeout 60 "$RANKD" serve --model_root "$MODELS" --backend cpu --grpc_port 0 --metrics_port -1 --http_port -1 \
    "$bad" >"$TMP/badflag.out" 2>&1
  rc=$?
  [ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "rankd serve $bad: exit $rc, want a refusal"
  expect_grep "rankd serve $bad names the flag" "$TMP/badflag.out" "${bad%%=*}"
done

start_rankd "$MODELS" --max_candidates "$MAX_CANDIDATES"

# One call at a time, so each good request really comes after its bad one.
rankctl score --input "$TMP/bad.jsonl" --output "$TMP/bad_out.jsonl" --concurrency 1 \
  2>"$TMP/bad.err" >/dev/null
expect_eq "rankctl exit code (some lines failed)" "$?" 1
cat "$TMP/bad.err" >&2
"$PY" "$E2E_DIR/e2e_util.py" check-bad --cases "$TMP/cases.jsonl" --stderr "$TMP/bad.err" ||
  fail "bad requests not answered as expected (see above)"
expect_grep "rankctl summary" "$TMP/bad.err" "^rankctl score: $N_OK ok, $((TOTAL - N_OK)) failed"
# Every good line's scores, bit-exact.
for ((i = 0; i < N_OK; i++)); do cat "$TMP/good_want.jsonl"; done >"$TMP/good_want_all.jsonl"
compare_scores "good requests between bad ones" "$TMP/good_want_all.jsonl" "$TMP/bad_out.jsonl"

# The same through the Python client: RankdError with the code and field.
PYTHONPATH="$PY_CLIENT_PATH" run_bounded 60 "$PY" - "$TARGET" "$TMP/bad.jsonl" \
  "$TMP/cases.jsonl" >"$TMP/py_bad.out" 2>&1 <<'PYEOF'
import json, sys
from rankd_client import RankingClient, RankdError
target, requests, cases = sys.argv[1:]
bad = 0
with RankingClient(target, timeout_s=5) as c, open(requests) as r, open(cases) as m:
    for line, case in zip(r, m):
        case = json.loads(case)
        try:
            c.score(line)
            code, msg = "OK", ""
        except RankdError as e:
            code, msg = e.code.name, e.message
        if code != case["code"] or case.get("fragment", "") not in msg:
            print("FAIL: %s: got %s: %s" % (case["name"], code, msg))
            bad += 1
print("python: %d mismatches" % bad)
sys.exit(1 if bad else 0)
PYEOF
[[ $? -eq 0 ]] || fail "Python client on bad requests: $(cat "$TMP/py_bad.out")"

# Server-side accounting: two passes (rankctl, Python) of the same lines.
scrape "$TMP/metrics.txt"
expect_eq "rankd_requests_total{model=mini,code=OK}" \
  "$(metric_int "$TMP/metrics.txt" rankd_requests_total 'model="mini"' 'code="OK"')" $((2 * N_OK))
expect_eq "rankd_requests_total{model=mini,code=INVALID_ARGUMENT}" \
  "$(metric_int "$TMP/metrics.txt" rankd_requests_total 'model="mini"' 'code="INVALID_ARGUMENT"')" \
  $((2 * N_INVALID))
# An unknown model is counted under model="", an unknown version of a served
# model under its name with version="" (bounded labels: one case of each).
expect_eq "rankd_requests_total{model=\"\",code=NOT_FOUND}" \
  "$(metric_int "$TMP/metrics.txt" rankd_requests_total 'model=""' 'code="NOT_FOUND"')" \
  $((2 * (N_NOT_FOUND - 1)))
expect_eq "rankd_requests_total{model=mini,version=\"\",code=NOT_FOUND}" \
  "$(metric_int "$TMP/metrics.txt" rankd_requests_total 'model="mini"' 'version=""' 'code="NOT_FOUND"')" 2
# Nothing invalid reached the engine: only the good requests (and the
# warm-up) were scored.
WARMUP_CANDIDATES=$((1 + 64))
expect_eq "rankd_candidates_total{model=mini}" \
  "$(metric_int "$TMP/metrics.txt" rankd_candidates_total 'model="mini"')" \
  $((2 * N_OK * 4 + WARMUP_CANDIDATES))

stop_rankd
expect_eq "rankd exit status after SIGTERM" "$RANKD_RC" 0
finish
