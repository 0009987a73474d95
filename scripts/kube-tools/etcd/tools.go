//go:build tools

// Package tools pins the etcd that the Kubernetes API server of the
// Kubernetes-target tests stores in; scripts/kube-up.sh builds it.
package tools

import _ "go.etcd.io/etcd/server/v3"
