#!/bin/bash
# End to end: rankload's output files. A two-point rate sweep (200 and 400
# req/s, 64-candidate requests, Zipf 1.2, server metrics scraped) with --json,
# --csv and --plot_dir: the JSON and CSV parse with Python's json / csv
# modules and hold one step per rate with the server-side figures; both PNG
# plots exist and are PNG images. Then a short SLO search (capped at 400
# req/s): found, and its CSV marks every probe pass / fail. A two-step run
# with --response_log: one line per call, with its version and step.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/rankload_lib.sh"

command -v gnuplot >/dev/null || die "gnuplot missing (scripts/setup.sh installs gnuplot-nox)"
MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
start_rankd "$MODELS"
METRICS="http://127.0.0.1:$METRICS_PORT/metrics"

rankload --model mini --candidates 64 --zipf_alpha 1.2 --rate 200,400 --warmup_s 0.3 \
  --duration_s 1 --metrics_url "$METRICS" --label "sweep test" --json "$TMP/sweep.json" \
  --csv "$TMP/sweep.csv" --plot_dir "$TMP/plots" >"$TMP/sweep.txt" 2>"$TMP/sweep.err"
expect_eq "rankload (sweep) exit code" "$?" 0
cat "$TMP/sweep.txt" >&2
expect_grep "sweep: the client's CPU in the table" "$TMP/sweep.txt" \
  "^1 +400[.]0/s( +[^ ]+){7} +[0-9]+ +[0-9]+ +[0-9]+[.][0-9]{2} "

"$PY" - "$TMP/sweep.json" "$TMP/sweep.csv" <<'PY' || fail "sweep JSON / CSV checks (see above)"
import csv, json, os, sys
report = json.load(open(sys.argv[1]))
rows = list(csv.DictReader(open(sys.argv[2], newline="")))
problems = []
def check(what, ok):
    if not ok:
        problems.append(what)
check("tool", report["tool"] == "rankload")
check("label", report["settings"]["label"] == "sweep test")
check("two steps", len(report["steps"]) == 2)
check("two csv rows", len(rows) == 2)
for i, (step, row) in enumerate(zip(report["steps"], rows)):
    want = [200, 400][i]
    check(f"step {i} target", step["target_rps"] == want)
    check(f"step {i} csv target", float(row["target_rps"]) == want)
    check(f"step {i} csv step", row["step"] == str(i))
    check(f"step {i} sent", step["sent"] == want)
    check(f"step {i} candidates", step["mean_candidates"] == 64)
    check(f"step {i} cand/s", abs(step["candidates_per_s"] - 64 * want) <= 0.05 * 64 * want)
    check(f"step {i} csv p99 = json p99", float(row["latency_p99_us"]) == step["latency_us"]["p99"])
    check(f"step {i} csv achieved = json", float(row["achieved_rps"]) == step["achieved_rps"])
    check(f"step {i} percentiles ordered",
          0 < step["latency_us"]["p50"] <= step["latency_us"]["p90"] <= step["latency_us"]["p99"]
          <= step["latency_us"]["p99_9"] <= step["latency_us"]["max"])
    s = step["server_window"]
    check(f"step {i} server figures", s is not None and s["requests"] > 0)
    if s:
        check(f"step {i} server batch size", s["mean_batch_candidates"] >= 64)
        check(f"step {i} server compute", s["mean_compute_us"] > 0)
        check(f"step {i} server queue", s["mean_queue_us"] >= 0)
        check(f"step {i} server OK", s["requests_by_code"].get("OK", 0) > 0)
    check(f"step {i} intervals", len(step["intervals"]) >= 1)
    # rankload's own CPU over the window: some, and no more than the machine has.
    check(f"step {i} client cpu", 0 < step["client_cpu_cores"] <= (os.cpu_count() or 1) + 0.5)
    check(f"step {i} csv client cpu = json", float(row["client_cpu_cores"]) == step["client_cpu_cores"])
check("csv columns", {"latency_p50_us", "server_mean_queue_us", "errors_by_code", "slo"} <= set(rows[0]))
if problems:
    print("failed:", problems, file=sys.stderr)
    sys.exit(1)
print("sweep JSON and CSV ok", file=sys.stderr)
PY

for png in latency_over_time latency_vs_throughput; do
  f="$TMP/plots/$png.png"
  [[ -s "$f" ]] || { fail "$png.png missing"; continue; }
  expect_eq "$png.png is a PNG" "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" 89504e470d0a1a0a
  [[ -s "$TMP/plots/$png.gp" ]] || fail "$png.gp missing"
done
expect_grep "plots listed on stderr" "$TMP/sweep.err" '^rankload: plots: .*latency_vs_throughput\.png'

# A short SLO search: 200/s passes, then the cap 400/s passes: found at 400.
rankload --model mini --mode slo --slo_latency_ms 1000 --rate 200 --slo_max_rps 400 \
  --warmup_s 0.2 --duration_s 0.8 --quiet --json "$TMP/slo.json" --csv "$TMP/slo.csv" \
  --plot_dir "$TMP/slo_plots" >"$TMP/slo.txt" 2>"$TMP/slo.err"
expect_eq "rankload (slo) exit code" "$?" 0
cat "$TMP/slo.txt" >&2
expect_eq "slo: found" "$(rj "$TMP/slo.json" 'r["slo"]["found"]')" True
expect_eq "slo: best rate" "$(rj "$TMP/slo.json" 'r["slo"]["best_rps"]')" 400.0
expect_eq "slo: probes" "$(rj "$TMP/slo.json" '[s["target_rps"] for s in r["steps"]]')" "[200.0, 400.0]"
expect_eq "slo: csv verdicts" "$("$PY" -c 'import csv,sys; print([r["slo"] for r in csv.DictReader(open(sys.argv[1]))])' "$TMP/slo.csv")" \
  "['pass', 'pass']"
expect_grep "slo: report" "$TMP/slo.txt" '^  highest passing rate 400.0 req/s'
[[ -s "$TMP/slo_plots/latency_vs_throughput.png" ]] || fail "slo: latency_vs_throughput.png missing"

# --response_log: one line per call of every step (warm-up included), each
# scheduled time once, the version that answered (the model's only one, 1)
# and the step index; as many lines per step as the JSON counts calls.
rankload --model mini --rate 100,200 --warmup_s 0.2 --duration_s 0.5 --quiet \
  --json "$TMP/calls.json" --response_log "$TMP/calls.csv" >/dev/null 2>"$TMP/calls.err"
expect_eq "response log: exit code" "$?" 0
"$PY" - "$TMP/calls.json" "$TMP/calls.csv" <<'PY' || fail "response log checks (see above)"
import csv, json, sys
report = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
rows = list(csv.DictReader(text.splitlines()))
problems = []
def check(what, ok):
    if not ok:
        problems.append(what)
check("header", text.split("\n", 1)[0] ==
      "scheduled_unix_us,sent_unix_us,done_unix_us,latency_us,code,version,step")
check("two steps", len(report["steps"]) == 2)
for i, step in enumerate(report["steps"]):
    mine = [r for r in rows if r["step"] == str(i)]
    check(f"step {i}: one row per call", len(mine) == sum(step["total_by_code"].values()))
    check(f"step {i}: each scheduled time once",
          len({r["scheduled_unix_us"] for r in mine}) == len(mine))
    check(f"step {i}: all OK from version 1",
          all(r["code"] == "OK" and r["version"] == "1" for r in mine))
    t = [(int(r["scheduled_unix_us"]), int(r["sent_unix_us"]), int(r["done_unix_us"]),
          float(r["latency_us"])) for r in mine]
    check(f"step {i}: scheduled <= sent <= done", all(s <= x <= d for s, x, d, _ in t))
    check(f"step {i}: latency = done - scheduled", all(abs(l - (d - s)) <= 1 for s, _, d, l in t))
check("steps 0 and 1 only", {r["step"] for r in rows} == {"0", "1"})
if problems:
    print("failed:", problems, file=sys.stderr)
    sys.exit(1)
print(f"response log ok: {len(rows)} calls", file=sys.stderr)
PY
expect_grep "response log: counted on stderr" "$TMP/calls.err" '^rankload: response log: [0-9]+ calls in '

# An SLO nothing meets: exit code 4.
rankload --model mini --mode slo --slo_latency_ms 0.000001 --rate 100 --slo_max_steps 2 \
  --warmup_s 0 --duration_s 0.3 --quiet >"$TMP/slo_fail.txt" 2>&1
expect_eq "slo not met: exit code" "$?" 4
expect_grep "slo not met: report" "$TMP/slo_fail.txt" 'NOT MET at any rate tried'

# A step that fails its SLO is followed by a wait for the server to go idle
# (--drain_s, from --metrics_url) before the next step; nothing follows the
# last step, so one wait for two steps.
rankload --model mini --mode open --rate 100,200 --slo_latency_ms 0.000001 --warmup_s 0 \
  --duration_s 0.3 --quiet --metrics_url "$METRICS" --json "$TMP/drain.json" \
  >"$TMP/drain.txt" 2>"$TMP/drain.err"
expect_eq "drain: exit code" "$?" 0
expect_eq "drain: waits" "$(grep -c 'step failed; server idle after' "$TMP/drain.err")" 1
expect_eq "drain: recorded" "$(rj "$TMP/drain.json" 'r["settings"]["drain_s"]')" 10.0
# --drain_s 0: no wait.
rankload --model mini --mode open --rate 100,200 --slo_latency_ms 0.000001 --warmup_s 0 \
  --duration_s 0.3 --quiet --metrics_url "$METRICS" --drain_s 0 >/dev/null 2>"$TMP/nodrain.err"
expect_eq "no drain: waits" "$(grep -c 'step failed' "$TMP/nodrain.err")" 0

stop_rankd
expect_eq "rankd exit status after SIGTERM" "$RANKD_RC" 0
finish
