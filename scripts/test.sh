#!/usr/bin/env bash
# Gantry's test command (the README's, and CI's): formatting, vet,
# staticcheck, every test with the race detector (the end-to-end tests run
# real server and agent processes on loopback, and real containers on a
# Docker Engine this script installs and starts when it can; the shared
# store and HA tests use a PostgreSQL server it starts the same way; the
# Kubernetes-target tests a real kube-apiserver, etcd, kube-scheduler and
# kwok that scripts/kube-up.sh builds once and caches; the dashboard tests
# Debian's headless Chromium), and a short fuzz run of the spec parser.
set -euo pipefail
cd "$(dirname "$0")/.."

# Go may be installed but not on PATH in a bare CI environment.
for dir in /usr/local/go/bin "$HOME/go/bin" "$(go env GOPATH 2>/dev/null)/bin"; do
  [[ -d "$dir" && ":$PATH:" != *":$dir:"* ]] && PATH="$dir:$PATH"
done
export PATH
command -v go >/dev/null || { echo "test.sh: Go is not installed (https://go.dev/dl/)" >&2; exit 1; }

STATICCHECK_VERSION=v0.8.2
# Fuzz budgets are counts of executions (about 10 s each here), not
# durations: with a duration, Go 1.26's fuzz coordinator can report
# "context deadline exceeded" at its end with no failing input
# (golang/go#75804, fixed in Go 1.27). GANTRY_FUZZ_EXECS sets one count
# for all three.
FUZZ_SPEC=${GANTRY_FUZZ_EXECS:-200000}x
FUZZ_REQUESTS=${GANTRY_FUZZ_EXECS:-60000}x
FUZZ_TOKENS=${GANTRY_FUZZ_EXECS:-500000}x

started=$SECONDS
step() { printf '\n==> %s (at %ds)\n' "$*" $((SECONDS - started)); }

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [[ -n "$unformatted" ]]; then
  echo "gofmt would change:" >&2; echo "$unformatted" >&2; exit 1
fi

step "go vet"
go vet ./...

step "staticcheck $STATICCHECK_VERSION"
if ! command -v staticcheck >/dev/null || [[ "$(staticcheck -version)" != *"${STATICCHECK_VERSION#v}"* ]]; then
  go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi
staticcheck ./...

step "fuzz the spec parser ($FUZZ_SPEC), the API request decoders ($FUZZ_REQUESTS) and the join-token verifier ($FUZZ_TOKENS)"
go test -run '^$' -fuzz '^FuzzParse$' -fuzztime "$FUZZ_SPEC" -fuzzminimizetime 2s ./spec
go test -run '^$' -fuzz '^FuzzDecodeRequests$' -fuzztime "$FUZZ_REQUESTS" -fuzzminimizetime 2s ./server
go test -run '^$' -fuzz '^FuzzVerify$' -fuzztime "$FUZZ_TOKENS" -fuzzminimizetime 2s ./auth

step "Docker Engine for the container tests"
./scripts/docker-up.sh

# needs NAME SCRIPT: exports the VAR=value lines SCRIPT prints (where its
# service listens). Without the service, its tests skip; on CI that is a
# failure.
needs() {
  local env
  if env=$("$2"); then
    # shellcheck disable=SC2046
    export $(echo "$env" | xargs)
  elif [[ "${CI:-}" == "true" ]]; then
    echo "test.sh: no $1, and CI=true: its tests must run on CI" >&2
    exit 1
  else
    echo "test.sh: no $1: its tests will SKIP" >&2
  fi
}

step "Chromium for the dashboard's browser tests (screenshots and load times kept in ${GANTRY_ARTIFACTS:-artifacts/})"
needs Chromium ./scripts/chromium-up.sh

step "HAProxy for the ingress tests"
needs HAProxy ./scripts/haproxy-up.sh

step "PostgreSQL for the shared-store and HA tests"
needs PostgreSQL ./scripts/postgres-up.sh

step "Kubernetes API server for the Kubernetes-target tests (built once from the module proxy, then cached)"
needs "Kubernetes API server" ./scripts/kube-up.sh

# The cloud providers' packages run without the race detector: they are
# request/response code over the cloud SDKs, whose race-instrumented build
# alone takes minutes on 2 cores. Everything else runs with it.
clouds='/provider/(aws|gcp|azure|clouds)(/|$)'
step "tests (race detector on)"
go test -race -count=1 -timeout 20m -skip '^TestFaultSchedule$' $(go list ./... | grep -Ev "$clouds")
step "fault schedule: ${GANTRY_FAULT_RUNS:-20} seeded schedules of kills, pauses and partitions on a PostgreSQL failover group and 3 servers (GANTRY_FAULT_RUNS=500 for the soak)"
fault_log=$(mktemp "${TMPDIR:-/tmp}/gantry-fault-schedule.XXXXXX")
set +e
go test -count=1 -timeout 30m -run '^TestFaultSchedule$' -v ./e2e 2>&1 | tee "$fault_log" |
  grep --line-buffered -E '^(=== RUN|--- |ok|FAIL|PASS)|faultschedule_test.go:[0-9]+: (seed|kill|stop|fault)|^ +(kill|stop|partition)-'
fault_status=${PIPESTATUS[0]}
set -e
if [[ $fault_status != 0 ]]; then
  echo "test.sh: the fault schedule failed; its whole output: $fault_log (the last 200 lines follow)" >&2
  tail -200 "$fault_log" >&2
  exit 1
fi
step "packing quality suite (one goroutine: without the race detector)"
go test -count=1 -run 'TestPackingQuality' ./planner
step "tests of the cloud providers (against fakes of their APIs)"
go test -count=1 -timeout 10m $(go list ./... | grep -E "$clouds")
step "done"
