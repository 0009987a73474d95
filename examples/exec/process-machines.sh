#!/usr/bin/env bash
# Machines for the exec provider, as `gantry agent` processes on this host:
# a working example of the exec protocol (see provider/exec), used by its
# tests. Each machine is a directory under $MACHINES_DIR and an agent
# process in its own session.
#
#   process-machines.sh launch|terminate|describe|list|stop|start|console
#
# The exec provider passes every value as a GANTRY_* variable (and as
# shell-quoted {{placeholders}} in the command template). The agents run
# GANTRY_BIN when it is set (a binary already on this host), else the one
# the cluster's spec.agent.binaries names for this host's architecture
# (downloaded and checked against its SHA-256); they run replicas with the
# exec config's
# runtime (GANTRY_AGENT_RUNTIME: process or docker), the one the server
# plans with.
set -euo pipefail

: "${MACHINES_DIR:?set MACHINES_DIR}"
mkdir -p "$MACHINES_DIR/by-key"
op=${1:?usage: $0 launch|terminate|describe|list|stop|start}

json_string() { # a JSON string literal of $1
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\t'/\\t}
  printf '"%s"' "$s"
}

# alive: the machine's agent runs (a zombie waiting to be reaped does not).
alive() {
  local pid
  [[ -f "$1/pid" ]] || return 1
  pid=$(cat "$1/pid")
  [[ -r /proc/$pid/status ]] && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null
}

start_agent() { # dir
  local dir=$1
  # shellcheck disable=SC2046
  setsid "$(cat "$dir/bin")" $(cat "$dir/args") >>"$dir/agent.log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
}

# fetch_agent DIR: GANTRY_BIN, or the agent binary for this architecture
# from spec.agent.binaries, downloaded into DIR and checked; prints its
# path.
fetch_agent() {
  local dir=$1 arch url sum
  if [[ -n ${GANTRY_BIN:-} ]]; then
    echo "$GANTRY_BIN"
    return
  fi
  case "$(uname -m)" in x86_64) arch=amd64 ;; aarch64 | arm64) arch=arm64 ;; *) arch=unknown ;; esac
  url_var="GANTRY_AGENT_BINARY_URL_${arch^^}" sum_var="GANTRY_AGENT_BINARY_SHA256_${arch^^}"
  url=${!url_var:-} sum=${!sum_var:-}
  if [[ -z $url ]]; then
    echo "the cluster names no agent binary for $arch (spec.agent.binaries), and GANTRY_BIN is not set" >&2
    exit 1
  fi
  curl -fsSL --max-time 120 -o "$dir/gantry" "$url" || { echo "download $url failed" >&2; exit 1; }
  echo "$sum  $dir/gantry" | sha256sum -c --quiet - >&2 || { echo "$url: SHA-256 is not $sum" >&2; exit 1; }
  chmod 0755 "$dir/gantry"
  echo "$dir/gantry"
}

stop_agent() { # dir
  local dir=$1 pid
  alive "$dir" || return 0
  pid=$(cat "$dir/pid")
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do alive "$dir" || return 0; sleep 0.1; done
  kill -KILL -- "-$pid" 2>/dev/null || true
}

describe() { # dir
  local dir=$1 id state addr='[]'
  id=$(basename "$dir")
  state=$(cat "$dir/state")
  if [[ $state == running ]] && ! alive "$dir"; then state=terminated; fi
  [[ $state == running ]] && addr='["127.0.0.1"]'
  printf '{"id": %s, "state": "%s", "addresses": %s, "tags": %s}' "$(json_string "$id")" "$state" "$addr" "$(cat "$dir/tags.json")"
}

machine_dir() {
  local id=${GANTRY_PROVIDER_ID:?}
  [[ $id =~ ^pm-[0-9a-f]+$ ]] || { echo "bad machine id" >&2; exit 5; }
  echo "$MACHINES_DIR/$id"
}

case "$op" in
launch)
  key_file="$MACHINES_DIR/by-key/$(printf '%s' "$GANTRY_IDEMPOTENCY_KEY" | sha256sum | cut -c1-32)"
  if [[ -f $key_file ]]; then cat "$key_file"; exit 0; fi
  id="pm-$(od -An -N5 -tx1 /dev/urandom | tr -d ' \n')"
  dir="$MACHINES_DIR/$id"
  mkdir -p "$dir/agent"
  tags=${GANTRY_TAGS_JSON:-}
  [[ -n $tags && $tags != null ]] || tags='{}'
  printf '%s' "$tags" >"$dir/tags.json"
  cp "$GANTRY_JOIN_TOKEN_FILE" "$dir/join-token" && chmod 0600 "$dir/join-token"
  fetch_agent "$dir" >"$dir/bin"
  # One argument per word: values were checked by the provider or are ours.
  echo "agent --server $GANTRY_SERVER_URL --cluster $GANTRY_CLUSTER --group $GANTRY_GROUP --machine-id $GANTRY_MACHINE \
--provider-id $id --zone ${GANTRY_ZONE:-default} --address 127.0.0.1 --runtime ${GANTRY_AGENT_RUNTIME:-process} --data-dir $dir/agent \
--cpu $GANTRY_CPU --memory $GANTRY_MEMORY_BYTES --join-token-file $dir/join-token\
${GANTRY_TEMPLATE_VERSION:+ --template-version $GANTRY_TEMPLATE_VERSION}" >"$dir/args"
  echo running >"$dir/state"
  start_agent "$dir"
  echo "$id" >"$key_file"
  echo "$id"
  ;;
terminate)
  dir=$(machine_dir)
  [[ -d $dir ]] || exit 0
  stop_agent "$dir"
  echo terminated >"$dir/state"
  ;;
stop)
  dir=$(machine_dir)
  [[ -d $dir ]] || exit 5
  stop_agent "$dir"
  echo stopped >"$dir/state"
  ;;
start)
  dir=$(machine_dir)
  [[ -d $dir ]] || exit 5
  echo running >"$dir/state"
  start_agent "$dir"
  describe "$dir"
  ;;
describe)
  dir=$(machine_dir)
  if [[ -d $dir ]]; then describe "$dir"; else echo '{"state": "not-found"}'; fi
  ;;
console)
  dir=$(machine_dir)
  [[ -f $dir/agent.log ]] || exit 5
  tail -n 200 "$dir/agent.log"
  ;;
list)
  sep=""
  printf '['
  for dir in "$MACHINES_DIR"/pm-*; do
    [[ -d $dir ]] || continue
    printf '%s' "$sep"; describe "$dir"; sep=", "
  done
  printf ']\n'
  ;;
*)
  echo "unknown operation $op" >&2; exit 2 ;;
esac
