#!/bin/bash
# End to end: Debian's real Prometheus server scrapes rankd. Prometheus
# (/usr/bin/prometheus, scripts/setup.sh) runs on 127.0.0.1 with a generated
# config scraping rankd's metrics port every 1 s; after N requests, its HTTP
# API (GET /api/v1/query?query=rankd_requests_total) must return the sample
# {model="mini", code="OK"} = N within 30 s, and up{job="rankd"} = 1.
source "$(dirname "$0")/lib.sh"

PROMETHEUS=/usr/bin/prometheus
[[ -x "$PROMETHEUS" ]] || die "$PROMETHEUS missing (scripts/setup.sh installs Debian's prometheus)"

N=37
MODELS="$TMP/models"
gen_model "$MODELS" mini --preset mini
gen_requests "$MODELS/mini/1" "$TMP/req.jsonl" --count "$N" --candidates 8 --seed 61
start_rankd "$MODELS"

PROM_PORT="$(free_port)"
cat >"$TMP/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: rankd
    static_configs:
      - targets: ['127.0.0.1:$METRICS_PORT']
YML
"$PROMETHEUS" --config.file="$TMP/prometheus.yml" --web.listen-address="127.0.0.1:$PROM_PORT" \
  --storage.tsdb.path="$TMP/prometheus-data" --log.level=warn >"$TMP/prometheus.log" 2>&1 &
PROM_PID=$!
track_pid "$PROM_PID"
PROM="http://127.0.0.1:$PROM_PORT"
for ((i = 0; i < 300; i++)); do  # up to 30 s
  curl -fsS --max-time 2 "$PROM/-/ready" >/dev/null 2>&1 && break
  kill -0 "$PROM_PID" 2>/dev/null || die "prometheus exited: $(tail -5 "$TMP/prometheus.log")"
  sleep 0.1
done
curl -fsS --max-time 2 "$PROM/-/ready" >/dev/null || die "prometheus not ready in 30 s: $(tail -5 "$TMP/prometheus.log")"
log "prometheus $PROM_PID ready on 127.0.0.1:$PROM_PORT"

rankctl score --input "$TMP/req.jsonl" --output "$TMP/got.jsonl" --concurrency 4 \
  2>"$TMP/rankctl.err" || fail "rankctl score: $(tail -3 "$TMP/rankctl.err")"
expect_grep "rankctl summary" "$TMP/rankctl.err" "^rankctl score: $N ok, 0 failed"

# query EXPR LABELS_JSON: the value of the sample whose labels include
# LABELS_JSON, from Prometheus' instant-query API; "" when there is none.
query() {
  curl -fsS --max-time 5 -G "$PROM/api/v1/query" --data-urlencode "query=$1" 2>/dev/null |
    "$PY" -c '
import json, sys
want = json.loads(sys.argv[1])
try:
    r = json.load(sys.stdin)
except ValueError:
    sys.exit(0)
if r.get("status") != "success":
    sys.exit(0)
for s in r["data"]["result"]:
    if all(s["metric"].get(k) == v for k, v in want.items()):
        print(s["value"][1])
        break' "$2"
}

GOT=""
for ((i = 0; i < 60; i++)); do  # up to 30 s
  GOT="$(query rankd_requests_total '{"model": "mini", "code": "OK", "job": "rankd"}')"
  [[ "$GOT" == "$N" ]] && break
  sleep 0.5
done
log "Prometheus query answered $GOT after $((i / 2)) s of polling"
expect_eq "Prometheus: rankd_requests_total{model=mini,code=OK}" "$GOT" "$N"
expect_eq "Prometheus: up{job=rankd}" "$(query 'up{job="rankd"}' '{"job": "rankd"}')" 1
expect_eq "Prometheus: rankd_model_ready{model=mini}" \
  "$(query rankd_model_ready '{"model": "mini", "version": "1"}')" 1
# A histogram Prometheus can aggregate: batches of the mini model, warm-up included.
B="$(query 'sum(rankd_batch_requests_count{model="mini"})' '{}')"
[[ -n "$B" && "$B" -ge 2 ]] || fail "Prometheus: sum(rankd_batch_requests_count) = '$B', want >= 2"

kill -TERM "$PROM_PID"
for ((i = 0; i < 100; i++)); do kill -0 "$PROM_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$PROM_PID" 2>/dev/null && { fail "prometheus did not stop in 10 s"; kill -KILL "$PROM_PID"; }
wait "$PROM_PID" 2>/dev/null

stop_rankd
expect_eq "rankd exit status after SIGTERM" "$RANKD_RC" 0
finish
