#!/usr/bin/env bash
# Heartbeats at fleet scale on three servers sharing one PostgreSQL: starts
# the throwaway PostgreSQL of scripts/postgres-up.sh, three `gantry server`
# processes (HTTPS, on free loopback ports; a database of this run's own)
# and the load generator,
# which joins MACHINES machines spread over the servers and sends RATE
# heartbeats/s for WARMUP (not measured), then DURATION; RUNS times, on a
# fresh database each time.
set -euo pipefail
cd "$(dirname "$0")/.."
MACHINES=${MACHINES:-10000} RATE=${RATE:-2000} DURATION=${DURATION:-30s} RUNS=${RUNS:-3} WARMUP=${WARMUP:-5s}

work=$(mktemp -d)
pids=()
stop_servers() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}
trap 'stop_servers; rm -rf "$work"' EXIT
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
      --advertise-url "https://127.0.0.1:$port" --agent-servers "$servers" --mutating-rate 0 >"$work/s$i.log" 2>&1 &
    pids+=($!)
  done
  for i in 1 2 3; do
    port=${ports[$((i - 1))]}
    until [[ -s "$work/s$i/ca.crt" ]] && curl -sf --cacert "$work/s$i/ca.crt" "https://127.0.0.1:$port/healthz" >/dev/null; do sleep 0.2; done
  done
  echo "run $run:"
  "$work/loadgen" --server "$servers" --ca-cert "$work/s1/ca.crt" --admin-token-file "$work/admin-token" \
    --machines "$MACHINES" --rate "$RATE" --duration "$DURATION" --warmup "$WARMUP"
  stop_servers
done
psql "$admin_db" -qc "DROP DATABASE IF EXISTS $dbname" >/dev/null
