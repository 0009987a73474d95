#!/usr/bin/env bash
# Makes a Docker Engine available to the tests: installs Debian's docker.io
# when it is missing and we are root, and starts dockerd when it is not
# running. The daemon it starts registers a runc-backed runtime under a
# Kata name ("kata-gantry-test"), so the TEE plumbing (detection, placement,
# runtime selection) runs for real; it isolates nothing more than runc.
# Without an engine the Docker suites skip loudly, or fail on CI.
set -uo pipefail

engine_up() { docker info >/dev/null 2>&1; }

# A dockerd that died leaves its pid file behind; once the pid is reused by
# another process, a new dockerd refuses to start ("pid file found"). The
# file is dropped when the process it names is not a dockerd.
drop_stale_pid_file() {
  local file=/var/run/docker.pid pid
  [[ -f $file ]] || return 0
  pid=$(<"$file")
  if [[ ! -r /proc/$pid/comm || $(<"/proc/$pid/comm") != dockerd ]]; then
    echo "docker-up: dropping $file (pid ${pid:-none} is not a dockerd)"
    rm -f "$file"
  fi
}

if ! engine_up; then
  if ! command -v dockerd >/dev/null && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "docker-up: installing docker.io from Debian"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
  fi
  if command -v dockerd >/dev/null && [[ $(id -u) == 0 ]]; then
    drop_stale_pid_file
    echo "docker-up: starting dockerd (log: ${TMPDIR:-/tmp}/gantry-dockerd.log)"
    nohup dockerd --add-runtime "kata-gantry-test=$(command -v runc || echo runc)" >"${TMPDIR:-/tmp}/gantry-dockerd.log" 2>&1 &
    for _ in $(seq 1 60); do engine_up && break; sleep 0.5; done
  fi
fi

if engine_up; then
  echo "docker-up: Docker Engine $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})')"
  exit 0
fi
if [[ "${CI:-}" == "true" ]]; then
  echo "docker-up: no Docker Engine, and CI=true: the Docker suites must run on CI" >&2
  exit 1
fi
cat >&2 <<'BANNER'
########################################################################
##  NO DOCKER ENGINE: the Docker runtime and provider tests will SKIP.  ##
##  Run ./scripts/test.sh as root on Debian to install and start it.    ##
########################################################################
BANNER
exit 0
