#!/usr/bin/env bash
# Makes a real Kubernetes control plane available to the Kubernetes-target
# tests: etcd, kube-apiserver and kube-scheduler, with kwok simulating the
# kubelets of the nodes the tests create. The binaries come from
# scripts/kube-build.sh (built once, then cached). Everything listens on
# loopback (the API server on GANTRY_KUBE_PORT, default 56443) with its
# state under ${TMPDIR:-/tmp}/gantry-kube; a control plane already up is
# reused. Prints the line for the caller to export: the admin kubeconfig.
#
# The API server authenticates static tokens: "admin" (system:masters)
# and "nobody" (no role at all: the tests of forbidden calls use it).
set -uo pipefail

port=${GANTRY_KUBE_PORT:-56443}
etcd_port=$((port - 4000))
kwok_port=$((port - 3000))
base=${TMPDIR:-/tmp}/gantry-kube
log() { echo "kube-up: $*" >&2; }
here=$(cd "$(dirname "$0")" && pwd)

bin=$("$here/kube-build.sh") || { log "could not build the Kubernetes binaries"; exit 1; }
mkdir -p "$base"
kubeconfig="$base/admin.kubeconfig"

healthy() { curl -sk --max-time 2 -H "Authorization: Bearer $(cat "$base/admin.token" 2>/dev/null)" "https://127.0.0.1:$port/readyz" 2>/dev/null | grep -qx ok; }
# A pid file left by a run that was killed may name a pid reused since by
# another process: only the one whose program is ours counts.
running() { [[ -f "$base/$1.pid" ]] && [[ "$(readlink "/proc/$(cat "$base/$1.pid")/exe" 2>/dev/null)" == "$(readlink -f "$bin/$1")" ]]; }
start() { # name, command...
  local name=$1; shift
  running "$name" && return
  log "starting $name (log: $base/$name.log)"
  setsid "$@" >"$base/$name.log" 2>&1 < /dev/null &
  echo $! >"$base/$name.pid"
}
wait_for() { # what, test command...
  local what=$1; shift
  for _ in $(seq 1 120); do "$@" && return 0; sleep 0.5; done
  log "$what did not come up"; return 1
}

if [[ ! -f "$base/sa.key" ]]; then
  openssl genrsa -out "$base/sa.key" 2048 2>/dev/null
  openssl rsa -in "$base/sa.key" -pubout -out "$base/sa.pub" 2>/dev/null
  head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$base/admin.token"
  head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$base/nobody.token"
  printf '%s,admin,admin,"system:masters"\n%s,nobody,nobody\n' "$(cat "$base/admin.token")" "$(cat "$base/nobody.token")" >"$base/tokens.csv"
  # kwok serves the kubelet API (container logs) over HTTPS; the API
  # server does not verify kubelets' certificates unless told to.
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=kwok -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$base/kwok.key" -out "$base/kwok.crt" 2>/dev/null
fi
# Every simulated container's log is this file.
# (in the CRI log format kubelets keep).
printf '2026-01-01T00:00:00.000000000Z stdout F hello from a kwok container\n2026-01-01T00:00:01.000000000Z stdout F second line\n' >"$base/container.log"
{ cat "$here/kube-tools/kwok-stages.yaml"; printf -- '---\napiVersion: kwok.x-k8s.io/v1alpha1\nkind: ClusterLogs\nmetadata: {name: all}\nspec:\n  logs: [{containers: [main], logsFile: %s}]\n' "$base/container.log"; } >"$base/kwok.yaml"

start etcd "$bin/etcd" --name gantry-test --data-dir "$base/etcd" --unsafe-no-fsync \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$((etcd_port + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((etcd_port + 1))" \
  --initial-cluster "gantry-test=http://127.0.0.1:$((etcd_port + 1))" --log-level warn
wait_for etcd curl -s --max-time 2 "http://127.0.0.1:$etcd_port/health" -o /dev/null || { tail -20 "$base/etcd.log" >&2; exit 1; }

start kube-apiserver "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$port" --cert-dir "$base/certs" \
  --token-auth-file "$base/tokens.csv" --authorization-mode RBAC \
  --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$base/sa.pub" \
  --service-account-signing-key-file "$base/sa.key" --service-cluster-ip-range 10.96.0.0/16 \
  --disable-admission-plugins ServiceAccount,TaintNodesByCondition --allow-privileged
wait_for kube-apiserver healthy || { tail -30 "$base/kube-apiserver.log" >&2; exit 1; }

cat >"$kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: gantry-test
  cluster: {server: "https://127.0.0.1:$port", insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: "$(cat "$base/admin.token")"}
- name: nobody
  user: {token: "$(cat "$base/nobody.token")"}
contexts:
- name: admin
  context: {cluster: gantry-test, user: admin}
- name: nobody
  context: {cluster: gantry-test, user: nobody}
current-context: admin
KUBECONFIG

start kube-scheduler "$bin/kube-scheduler" --kubeconfig "$kubeconfig" --leader-elect=false --secure-port 0
start kwok "$bin/kwok" --kubeconfig "$kubeconfig" --config "$base/kwok.yaml" \
  --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
  --cidr 10.244.0.1/16 --node-ip 127.0.0.1 --node-port "$kwok_port" --server-address "127.0.0.1:$kwok_port" \
  --tls-cert-file "$base/kwok.crt" --tls-private-key-file "$base/kwok.key"
sleep 1
for p in kube-scheduler kwok; do running $p || { tail -20 "$base/$p.log" >&2; log "$p exited"; exit 1; }; done
echo "GANTRY_TEST_KUBECONFIG=$kubeconfig"
