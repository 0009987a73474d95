#!/usr/bin/env bash
# Makes a PostgreSQL server available to the tests: installs Debian's
# postgresql when it is missing and we are root, and starts a throwaway
# cluster of its own on a loopback port (GANTRY_PG_PORT, default 55432)
# with its data under ${TMPDIR:-/tmp}/gantry-postgres. Prints two lines
# for the caller to export: the server's URL and the directory of the
# PostgreSQL binaries (tests that stop the database start their own).
# The cluster trusts loopback connections and runs without fsync: it holds
# test data only.
set -uo pipefail

port=${GANTRY_PG_PORT:-55432}
base=${TMPDIR:-/tmp}/gantry-postgres
log() { echo "postgres-up: $*" >&2; }

find_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
bin=$(find_bin)
if [[ -z "$bin" && $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  log "installing postgresql from Debian"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  bin=$(find_bin)
fi
if [[ -z "$bin" ]]; then
  log "PostgreSQL is not installed (Debian package postgresql)"
  exit 1
fi

# initdb and postgres refuse to run as root.
as_owner() {
  if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}
mkdir -p "$base"
[[ $(id -u) == 0 ]] && chown postgres "$base"
if [[ ! -f "$base/data/PG_VERSION" ]]; then
  log "initdb $base/data"
  as_owner "$bin/initdb" -D "$base/data" -U gantry -A trust --no-sync >"$base/initdb.log" 2>&1 || { cat "$base/initdb.log" >&2; exit 1; }
fi
if ! as_owner "$bin/pg_ctl" -D "$base/data" status >/dev/null 2>&1; then
  log "starting on 127.0.0.1:$port (log: $base/postgres.log)"
  as_owner "$bin/pg_ctl" -D "$base/data" -l "$base/postgres.log" -w -t 60 \
    -o "-p $port -k $base -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300" start >/dev/null ||
    { tail -20 "$base/postgres.log" >&2; exit 1; }
fi
echo "GANTRY_TEST_POSTGRES=postgres://gantry@127.0.0.1:$port/postgres?sslmode=disable"
echo "GANTRY_TEST_POSTGRES_BIN=$bin"
