#!/usr/bin/env bash
# Makes headless Chromium available to the dashboard's browser tests:
# installs Debian's chromium when it is missing and we are root. Prints
# GANTRY_CHROMIUM=<path> for the caller to export.
set -uo pipefail
log() { echo "chromium-up: $*" >&2; }

find_chromium() { command -v chromium || command -v chromium-browser || true; }
bin=$(find_chromium)
if [[ -z "$bin" && $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  log "installing chromium from Debian"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  bin=$(find_chromium)
fi
if [[ -z "$bin" ]]; then
  log "Chromium is not installed (Debian package chromium)"
  exit 1
fi
echo "GANTRY_CHROMIUM=$bin"
