#!/usr/bin/env bash
# Gantry's test command (the README's, and CI's): formatting, vet,
# staticcheck, every test with the race detector (the end-to-end tests run
# real server and agent processes on loopback, and real containers on a
# Docker Engine this script installs and starts when it can; the shared
# store and HA tests use a PostgreSQL server it starts the same way; the
# Kubernetes-target tests a real kube-apiserver, etcd, kube-scheduler and
# kwok that scripts/kube-up.sh builds once and caches; the dashboard tests
# Debian's headless Chromium), and a short fuzz run of the spec parser.
#
# The services are set up in the background (one after the other: apt
# takes one lock) while the Go code is checked and compiled; every step
# runs even when one before it failed, and the run ends with the list of
# the steps that failed.
set -uo pipefail
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

# The compiler and the analysers are Go programs: with GOGC=400 they
# collect less often, and a cold compile of the cloud SDKs took 10% less
# time (177 s against 197 s, 2026-11-27; GOGC=off with a memory limit was
# slower). Only the build steps get it, never the tests.
COMPILE_GOGC=${GANTRY_COMPILE_GOGC:-400}

started=$SECONDS
failed=()
step() { printf '\n==> %s (at %ds)\n' "$*" $((SECONDS - started)); }
# check NAME COMMAND...: runs a step's command; a failure is recorded and
# the run goes on. The command runs in the background and the script
# waits for it: bash runs a trap only once its foreground command ends,
# and wait returns at once on a signal (see stop_run). A background
# command would ignore SIGINT and SIGQUIT, and so would every process it
# starts (the tests' servers, agents and PostgreSQL): the command gets
# them back as a foreground one has them.
check() {
  local name=$1; shift
  (trap - INT QUIT; "$@") &
  if ! wait $!; then
    echo "test.sh: FAILED: $name" >&2
    failed+=("$name")
  fi
}

# descendants PID: every process below PID, parents before children
# (found by parent pid: this run's own tree, never by a process's name;
# other checkouts' runs on this host are left alone).
descendants() {
  local child
  for child in $(pgrep -P "$1"); do
    echo "$child"
    descendants "$child"
  done
}

# stop_run STATUS: an interrupted run (Ctrl-C, CI's kill, a closed
# terminal) takes down every process it started, servers and agents of the
# tests included, instead of leaving them running: TERM, then KILL for
# what is left after GANTRY_TEST_STOP_GRACE seconds. The services it set
# up to keep (dockerd, PostgreSQL, the Kubernetes API server) run detached
# once set up, outside this tree.
stop_run() {
  local status=$1 pids survivors
  trap - INT TERM HUP EXIT
  # Alive at once: the listing's own subshells have ended.
  pids=$(ps -o pid= -p "$(descendants $$ | paste -sd, -)" 2>/dev/null | xargs)
  echo "test.sh: interrupted; stopping the $(wc -w <<<"$pids") processes this run started" >&2
  # shellcheck disable=SC2086
  [[ -n $pids ]] && kill -TERM $pids 2>/dev/null
  survivors=$pids # with no grace at all, every one of them gets KILL
  for _ in $(seq "${GANTRY_TEST_STOP_GRACE:-5}"); do
    survivors=$(ps -o pid= -p "${pids// /,}" 2>/dev/null | xargs)
    [[ -z $survivors ]] && break
    sleep 1
  done
  # shellcheck disable=SC2086
  [[ -n $survivors ]] && kill -KILL $survivors 2>/dev/null
  exit "$status"
}
trap 'stop_run 130' INT
trap 'stop_run 143' TERM
trap 'stop_run 129' HUP

# The services, in the background: each script's output goes to a file of
# this run's, read once the Go code is compiled.
services_dir=$(mktemp -d "${TMPDIR:-/tmp}/gantry-test-services.XXXXXX")
services=(docker chromium haproxy postgres kube)
(
  for s in "${services[@]}"; do
    "./scripts/$s-up.sh" >"$services_dir/$s.out" 2>"$services_dir/$s.log"
    echo $? >"$services_dir/$s.status"
  done
) &
services_pid=$!
trap 'kill $services_pid 2>/dev/null' EXIT
echo "test.sh: setting up Docker Engine, Chromium, HAProxy, PostgreSQL and a Kubernetes API server in the background (logs in $services_dir)"

step "gofmt"
gofmt_check() {
  local unformatted
  unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
  [[ -z "$unformatted" ]] || { echo "gofmt would change:" >&2; echo "$unformatted" >&2; return 1; }
}
check gofmt gofmt_check

# progress prints a line every 25 packages a build names (go build -v
# names each package it compiles, and nothing for what its cache holds).
# A shell loop, not awk: Debian's awk (mawk) reads a pipe in blocks.
progress() {
  local n=0 line
  while IFS= read -r line; do
    [[ $line == go:* || $line == '#'* ]] && continue
    n=$((n + 1))
    ((n % 25 == 0)) && printf '  %s: %d packages compiled\n' "$1" "$n"
  done
  printf '  %s: %d packages compiled (the rest cached)\n' "$1" "$n"
}

# compile WHAT FLAGS...: builds every package (those a build would take
# from its cache print nothing), counting as it goes; a failure shows the
# compiler's end.
compile() {
  local what=$1; shift
  # shellcheck disable=SC2068
  GOGC=$COMPILE_GOGC go build -v $@ >"$services_dir/$what.log" 2>&1 &
  local pid=$!
  tail -n +1 -f --pid=$pid "$services_dir/$what.log" | grep --line-buffered -v '^#' | progress "$what"
  wait $pid || { tail -30 "$services_dir/$what.log" >&2; return 1; }
}

step "compile, with a line every 25 packages"
check "compile" compile build ./...

step "go vet"
check "go vet" env GOGC="$COMPILE_GOGC" go vet ./...

step "staticcheck $STATICCHECK_VERSION"
staticcheck_run() {
  local bin
  bin=$(command -v staticcheck)
  if [[ -z "$bin" ]] || [[ "$("$bin" -version)" != *"${STATICCHECK_VERSION#v}"* ]]; then
    GOGC=$COMPILE_GOGC go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" || return 1
    # Where go install puts it, on PATH or not (on a fresh machine
    # $(go env GOPATH)/bin does not exist before this install).
    bin="$(go env GOBIN)"
    bin="${bin:-$(go env GOPATH)/bin}/staticcheck"
  fi
  GOGC=$COMPILE_GOGC "$bin" ./...
}
check staticcheck staticcheck_run

# Three kinds of packages run without the race detector; everything else
# runs with it.
# - The cloud providers: request/response code over the cloud SDKs, whose
#   race-instrumented build alone takes minutes on 2 cores.
# - The commands: they link those SDKs; their concurrency is the server's
#   and the client's, raced in their own packages.
# - The decisions and parsers: pure functions of a snapshot that start no
#   goroutine and share no memory (their code and tests have no go
#   statement, no sync or atomic). The detector has nothing to find there
#   and makes their CPU-bound tests 5-10 times slower (decide: 132 s
#   raced, 2026-11-27).
# The packages without it are tested while the raced ones run.
unraced='/provider/(aws|gcp|azure|clouds)(/|$)|/cmd/|/(api|decide|decide/decidetest|planner|scheduler|spec|fleet|endpoints|failover|failover/generic|replica|replica/ingest|runtime|target)$'
race_packages=$(go list ./... | grep -Ev "$unraced")
unraced_packages=$(go list ./... | grep -E "$unraced")

step "compile with the race detector, with a line every 25 packages"
# go build refuses a named package with only tests (e2e): those compile
# with the tests.
# shellcheck disable=SC2086
race_build_packages=$(go list -f '{{if .GoFiles}}{{.ImportPath}}{{end}}' $race_packages | grep .)
# shellcheck disable=SC2086
check "compile (race)" compile race-build -race $race_build_packages

step "fuzz the spec parser ($FUZZ_SPEC), the API request decoders ($FUZZ_REQUESTS) and the join-token verifier ($FUZZ_TOKENS)"
check "fuzz spec" go test -run '^$' -fuzz '^FuzzParse$' -fuzztime "$FUZZ_SPEC" -fuzzminimizetime 2s ./spec
check "fuzz requests" go test -run '^$' -fuzz '^FuzzDecodeRequests$' -fuzztime "$FUZZ_REQUESTS" -fuzzminimizetime 2s ./server/respond
check "fuzz tokens" go test -run '^$' -fuzz '^FuzzVerify$' -fuzztime "$FUZZ_TOKENS" -fuzzminimizetime 2s ./auth

step "waiting for the services set up in the background"
wait $services_pid
trap - EXIT
# need NAME: exports the VAR=value lines the service's script printed
# (where its service listens). Without the service, its tests skip; on CI
# that is a failure.
need() {
  local name=$1 status
  status=$(cat "$services_dir/$name.status" 2>/dev/null || echo 1)
  cat "$services_dir/$name.log" >&2
  if [[ $status == 0 ]]; then
    [[ $name == docker ]] && return 0 # it prints what it did, not variables
    # shellcheck disable=SC2046
    export $(grep -E '^[A-Z_]+=' "$services_dir/$name.out" | xargs)
  elif [[ "${CI:-}" == "true" ]]; then
    echo "test.sh: no $name, and CI=true: its tests must run on CI" >&2
    failed+=("service $name")
  else
    echo "test.sh: no $name: its tests will SKIP" >&2
  fi
}
for s in "${services[@]}"; do need "$s"; done
cat "$services_dir/docker.out"

# The PostgreSQL failover tests count leases of seconds (4 s, a primary
# stops itself 3 s after its last answered heartbeat): beside ~60 raced
# packages on 2 cores an agent starved of CPU for that long rightly stops
# its primary, and the test sees a fault it did not make (CI of 599de64,
# 2026-12-01). They run after the raced tests, alone, like the fault
# schedule.
failover_e2e='^(TestFailoverPostgres|TestStaleStandbyIsNotPromoted|TestStoppedAgentsPrimaryFencesItself|TestFailoverPartitionedPrimaryStopsItself|TestFailoverSurvivesServerKills|TestPromotedPrimaryRecoversFromAPostgresCrash)$'

step "tests (race detector on; a line per package as it ends), and beside them the packing quality suite and the packages without the race detector"
# unraced: the packages without the race detector (the planner's with
# its packing quality suite), in the background; their output follows the
# raced tests'.
unraced_tests() {
  echo "==> the decisions and parsers (the planner's packing quality suite among them), the cloud providers (against fakes of their APIs) and the commands"
  # shellcheck disable=SC2086
  go test -count=1 -timeout 20m $unraced_packages
}
unraced_tests >"$services_dir/unraced.out" 2>&1 &
unraced_pid=$!
# shellcheck disable=SC2086
check "tests" go test -race -count=1 -timeout 20m -skip "^(TestFaultSchedule|${failover_e2e#^(}" $race_packages
step "the packing quality suite and the packages without the race detector (run beside the raced tests)"
wait $unraced_pid
unraced_status=$?
cat "$services_dir/unraced.out"
[[ $unraced_status == 0 ]] || { echo "test.sh: FAILED: unraced tests" >&2; failed+=("unraced tests: decisions and parsers, packing quality, cloud providers, commands"); }

# e2e_alone NAME PATTERN TIMEOUT LINES FILTER: runs the e2e tests PATTERN
# names, alone, printing the lines FILTER picks as they come; on a failure,
# where the whole output is and its last LINES lines.
e2e_alone() {
  local name=$1 pattern=$2 timeout=$3 lines=$4 filter=$5 log status
  log=$(mktemp "${TMPDIR:-/tmp}/gantry-${name// /-}.XXXXXX")
  go test -count=1 -timeout "$timeout" -run "$pattern" -v ./e2e 2>&1 | tee "$log" | grep --line-buffered -E "$filter"
  status=${PIPESTATUS[0]}
  if [[ $status != 0 ]]; then
    echo "test.sh: the $name failed; its whole output: $log (the last $lines lines follow)" >&2
    tail -"$lines" "$log" >&2
    return 1
  fi
}

step "the PostgreSQL failover tests, alone (a line per test as it ends)"
check "failover tests" e2e_alone "failover tests" "$failover_e2e" 15m 300 '^(--- |ok|FAIL|PASS)'

step "fault schedule: ${GANTRY_FAULT_RUNS:-20} seeded schedules of kills, pauses and partitions on a PostgreSQL failover group and 3 servers (GANTRY_FAULT_RUNS=500 for the soak)"
check "fault schedule" e2e_alone "fault schedule" '^TestFaultSchedule$' 30m 200 \
  '^(=== RUN|--- |ok|FAIL|PASS)|faultschedule_test.go:[0-9]+: (seed|kill|stop|fault)|^ +(kill|stop|partition)-'

step "done"
if [[ ${#failed[@]} -gt 0 ]]; then
  printf 'test.sh: %d step(s) failed:\n' ${#failed[@]} >&2
  printf '  - %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "test.sh: every step passed in $((SECONDS - started)) s"
