#!/usr/bin/env bash
# Heartbeats at fleet scale on three servers sharing one PostgreSQL: starts
# the throwaway PostgreSQL of scripts/postgres-up.sh, three `gantry server`
# processes (HTTPS, on loopback ports 7501-7503) and the load generator,
# which joins MACHINES machines spread over the servers and sends RATE
# heartbeats/s for DURATION; RUNS times, on a fresh database each time.
set -euo pipefail
cd "$(dirname "$0")/.."
MACHINES=${MACHINES:-10000} RATE=${RATE:-2000} DURATION=${DURATION:-30s} RUNS=${RUNS:-3}

work=$(mktemp -d)
trap 'pkill -f "gantry server --store .*/gantry_bench" || true; rm -rf "$work"' EXIT
go build -o "$work/gantry" ./cmd/gantry
go build -o "$work/loadgen" ./cmd/gantry-loadgen
# shellcheck disable=SC2046
export $(./scripts/postgres-up.sh | xargs)
admin_db=$GANTRY_TEST_POSTGRES
db=${admin_db/\/postgres\?/\/gantry_bench?}
export GANTRY_ADMIN_TOKEN GANTRY_ENCRYPTION_KEY
GANTRY_ADMIN_TOKEN=$(openssl rand -hex 24)
echo "$GANTRY_ADMIN_TOKEN" >"$work/admin-token"
servers=https://127.0.0.1:7501,https://127.0.0.1:7502,https://127.0.0.1:7503

for run in $(seq 1 "$RUNS"); do
  psql "$admin_db" -qc "DROP DATABASE IF EXISTS gantry_bench" -c "CREATE DATABASE gantry_bench" >/dev/null
  GANTRY_ENCRYPTION_KEY=$(openssl rand -hex 32)
  rm -rf "$work"/s1 "$work"/s2 "$work"/s3
  for i in 1 2 3; do
    "$work/gantry" server --store "$db" --data-dir "$work/s$i" --name "s$i" --listen "127.0.0.1:750$i" \
      --advertise-url "https://127.0.0.1:750$i" --agent-servers "$servers" --mutating-rate 0 >"$work/s$i.log" 2>&1 &
  done
  for i in 1 2 3; do
    until [[ -s "$work/s$i/ca.crt" ]] && curl -sf --cacert "$work/s$i/ca.crt" "https://127.0.0.1:750$i/healthz" >/dev/null; do sleep 0.2; done
  done
  echo "run $run:"
  "$work/loadgen" --server "$servers" --ca-cert "$work/s1/ca.crt" --admin-token-file "$work/admin-token" \
    --machines "$MACHINES" --rate "$RATE" --duration "$DURATION"
  pkill -f "gantry server --store .*/gantry_bench" || true
  wait
done
