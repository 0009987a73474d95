#!/usr/bin/env bash
# Heartbeats at fleet scale on three servers sharing one PostgreSQL: starts
# the throwaway PostgreSQL of scripts/postgres-up.sh, three `gantry server`
# processes (HTTPS, on free loopback ports; a database of this run's own)
# and the load generator,
# which joins MACHINES machines spread over the servers and sends RATE
# heartbeats/s for WARMUP (not measured), then DURATION; RUNS times, on a
# fresh database each time. With SERVICES, that many services of
# REPLICAS replicas each are applied once the machines joined, and the
# warm-up lasts until the servers hold them all. After each run it
# reports each server's resident memory (now and at its peak). It also reports the whole machine's CPU
# (servers, PostgreSQL and generator) over the measured DURATION, from
# /proc/stat: keep the machine otherwise quiet. The servers are told the
# generator's RATE (--max-heartbeats-per-second), so the heartbeat period
# they expect is the generator's (MACHINES/RATE when longer than the
# base period) and a machine it reaches in turn is not found lost. Every SAMPLE_EVERY
# seconds (default 60) it prints a line of the replicas held and each
# server's resident memory and Go heap (in use; idle, not returned to
# the system). With LOG_DIR, each run's server logs are kept there.
set -euo pipefail
cd "$(dirname "$0")/.."
MACHINES=${MACHINES:-10000} RATE=${RATE:-2000} DURATION=${DURATION:-30s} RUNS=${RUNS:-3} WARMUP=${WARMUP:-5s}
SERVICES=${SERVICES:-0} REPLICAS=${REPLICAS:-10} SAMPLE_EVERY=${SAMPLE_EVERY:-60} LOG_DIR=${LOG_DIR:-}
failed=0

work=$(mktemp -d)
pids=()
stop_servers() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}
dbname=
# cleanup stops the servers and drops the run's database, however the
# script ends (a stopped benchmark left its database behind).
cleanup() {
  stop_servers
  if [[ -n $dbname ]]; then psql "$GANTRY_TEST_POSTGRES" -qc "DROP DATABASE IF EXISTS $dbname" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' INT TERM # so that the EXIT trap stops the servers
# cpu_sampler writes "<epoch seconds> <busy jiffies> <total jiffies>" every
# second, from the first line of /proc/stat.
cpu_sampler() {
  while true; do
    read -r _ user nice system idle iowait irq softirq steal _ </proc/stat
    echo "$(date +%s.%N) $((user + nice + system + irq + softirq + steal)) $((user + nice + system + idle + iowait + irq + softirq + steal))"
    sleep 1
  done
}
# cpu_used prints the cores busy over the last $1 seconds of a sampler's file.
cpu_used() {
  awk -v window="$1" -v cores="$(nproc)" '{ t[NR] = $1; b[NR] = $2; a[NR] = $3 } END {
    for (i = NR; i > 1 && t[NR] - t[i] < window; i--) {}
    printf "%.2f", (b[NR] - b[i]) / (a[NR] - a[i]) * cores }' "$2"
}
# decision_latency prints, from a server's metrics on stdin, the
# quantiles of its decision latency histogram (the bucket bounds they fall
# in), when it led passes that decided something.
decision_latency() {
  python3 -c '
import re, sys
buckets = []
for line in sys.stdin:
    m = re.match(r"gantry_decision_latency_seconds_bucket\{le=\"([^\"]+)\"\} (\S+)", line)
    if m:
        buckets.append((float(m.group(1)), float(m.group(2))))
if buckets and buckets[-1][1] > 0:
    total = buckets[-1][1]
    q = lambda f: next(le for le, n in buckets if n >= f * total)
    print(f"server {sys.argv[1]}: {total:.0f} deciding passes; decision latency p50 <= {q(0.5)} s, p99 <= {q(0.99)} s")
' "$1"
}
# memory_sampler prints, every SAMPLE_EVERY seconds, the minutes since it
# started, the replicas in the store and, per server, resident MiB and Go
# heap in use / idle-not-returned MiB.
memory_sampler() {
  local start=$SECONDS line i pid port stats
  while sleep "$SAMPLE_EVERY"; do
    line="sample: $(((SECONDS - start) / 60)) min, $(psql "$db" -Atc 'SELECT count(*) FROM replicas' 2>/dev/null || echo '?') replicas;"
    for i in 1 2 3; do
      pid=${pids[$((i - 1))]} port=${ports[$((i - 1))]}
      stats=$(curl -sf --max-time 10 --cacert "$work/s$i/ca.crt" "https://127.0.0.1:$port/metrics" | awk '
        /^go_memstats_heap_inuse_bytes / { inuse = $2 } /^go_memstats_heap_idle_bytes / { idle = $2 }
        /^go_memstats_heap_released_bytes / { rel = $2 }
        END { printf "heap %.0f/%.0f", inuse / 1048576, (idle - rel) / 1048576 }') || stats="heap ?"
      line+=" s$i $(awk '/^VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status" 2>/dev/null) MiB $stats;"
    done
    echo "$line"
  done
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
go build -o "$work/gantry" ./cmd/gantry
go build -o "$work/loadgen" ./cmd/gantry-loadgen
# shellcheck disable=SC2046
export $(./scripts/postgres-up.sh | xargs)
admin_db=$GANTRY_TEST_POSTGRES
dbname=gantry_bench_$$
db=${admin_db/\/postgres\?/\/$dbname?}
export GANTRY_ADMIN_TOKEN GANTRY_ENCRYPTION_KEY
GANTRY_ADMIN_TOKEN=$(openssl rand -hex 24)
echo "$GANTRY_ADMIN_TOKEN" >"$work/admin-token"
ports=("$(free_port)" "$(free_port)" "$(free_port)")
servers=https://127.0.0.1:${ports[0]},https://127.0.0.1:${ports[1]},https://127.0.0.1:${ports[2]}

for run in $(seq 1 "$RUNS"); do
  psql "$admin_db" -qc "DROP DATABASE IF EXISTS $dbname" -c "CREATE DATABASE $dbname" >/dev/null
  GANTRY_ENCRYPTION_KEY=$(openssl rand -hex 32)
  rm -rf "$work"/s1 "$work"/s2 "$work"/s3
  for i in 1 2 3; do
    port=${ports[$((i - 1))]}
    "$work/gantry" server --store "$db" --data-dir "$work/s$i" --name "s$i" --listen "127.0.0.1:$port" \
      --advertise-url "https://127.0.0.1:$port" --agent-servers "$servers" --mutating-rate 0 \
      --max-heartbeats-per-second "$RATE" >"$work/s$i.log" 2>&1 &
    pids+=($!)
  done
  for i in 1 2 3; do
    port=${ports[$((i - 1))]}
    until [[ -s "$work/s$i/ca.crt" ]] && curl -sf --cacert "$work/s$i/ca.crt" "https://127.0.0.1:$port/healthz" >/dev/null; do sleep 0.2; done
  done
  echo "run $run:"
  cpu_sampler >"$work/cpu" &
  sampler=$!
  memory_sampler &
  mem_sampler=$!
  if ! "$work/loadgen" --server "$servers" --ca-cert "$work/s1/ca.crt" --admin-token-file "$work/admin-token" \
    --machines "$MACHINES" --rate "$RATE" --duration "$DURATION" --warmup "$WARMUP" \
    --services "$SERVICES" --replicas-per-service "$REPLICAS"; then
    failed=1 # the servers' logs go with the work directory: their last words now
    for i in 1 2 3; do
      echo "server s$i's log, the last lines other than failed requests:"
      grep -v 'msg="request failed"' "$work/s$i.log" | tail -15 | cut -c1-600
    done
  fi
  for i in 1 2 3; do
    pid=${pids[$((i - 1))]}
    echo "server s$i: resident $(awk '/^VmRSS/ {printf "%.0f MiB", $2 / 1024}' "/proc/$pid/status"), peak $(awk '/^VmHWM/ {printf "%.0f MiB", $2 / 1024}' "/proc/$pid/status")"
    curl -sf --cacert "$work/s$i/ca.crt" "https://127.0.0.1:${ports[$((i - 1))]}/metrics" | decision_latency "s$i"
  done
  kill "$sampler" "$mem_sampler"
  if [[ -n "$LOG_DIR" ]]; then
    mkdir -p "$LOG_DIR"
    for i in 1 2 3; do cp "$work/s$i.log" "$LOG_DIR/run$run-s$i.log"; done
  fi
  window=$(python3 -c "import re, sys; print(sum(float(n) * {'h': 3600, 'm': 60, 's': 1}[u] for n, u in re.findall(r'([0-9.]+)([hms])', sys.argv[1])))" "$DURATION")
  cores=$(cpu_used "$window" "$work/cpu")
  echo "cpu over the measured ${DURATION}: $cores cores busy of $(nproc) (servers, PostgreSQL and generator); $(python3 -c "print(f'{$cores / ($RATE / 1000):.2f}')") core-s per 1,000 heartbeats/s"
  stop_servers
done
exit "$failed"
