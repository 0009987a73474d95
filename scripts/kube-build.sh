#!/usr/bin/env bash
# Builds the real Kubernetes parts the Kubernetes-target tests run against:
# kube-apiserver and kube-scheduler (k8s.io/kubernetes), etcd, and kwok,
# each from its pinned module in scripts/kube-tools, through the Go module
# proxy. The binaries are cached by the hash of those modules' go.mod and
# go.sum, so a run after the first builds nothing. Prints the directory.
set -euo pipefail
cd "$(dirname "$0")/kube-tools"

key=$(cat */go.mod */go.sum | sha256sum | cut -c1-16)
dir="${GANTRY_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gantry/kube-$key}"
build() { # module-dir package binary
  [[ -x "$dir/$3" ]] && return
  echo "kube-build.sh: building $3 (first run only; minutes on 2 cores)" >&2
  (cd "$1" && GOGC=${GANTRY_COMPILE_GOGC:-400} go build -trimpath -o "$dir/$3.tmp" "$2") && mv "$dir/$3.tmp" "$dir/$3"
}
mkdir -p "$dir"
build etcd go.etcd.io/etcd/server/v3 etcd
build kubernetes k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver
build kubernetes k8s.io/kubernetes/cmd/kube-scheduler kube-scheduler
build kwok sigs.k8s.io/kwok/cmd/kwok kwok
echo "$dir"
