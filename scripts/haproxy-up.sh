#!/usr/bin/env bash
# Makes HAProxy available to the ingress tests (agents run it on edge
# machines): installs Debian's haproxy when it is missing and we are
# root. Prints GANTRY_HAPROXY=<path> for the caller to export. Nothing is
# started here: each test's agents start their own HAProxy on their own
# ports.
set -uo pipefail
log() { echo "haproxy-up: $*" >&2; }

find_haproxy() { command -v haproxy || { [[ -x /usr/sbin/haproxy ]] && echo /usr/sbin/haproxy; } || true; }
bin=$(find_haproxy)
if [[ -z "$bin" && $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  log "installing haproxy from Debian"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null
  bin=$(find_haproxy)
fi
if [[ -z "$bin" ]]; then
  log "HAProxy is not installed (Debian package haproxy)"
  exit 1
fi
log "$("$bin" -v | head -1)"
echo "GANTRY_HAPROXY=$bin"
