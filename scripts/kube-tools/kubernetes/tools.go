//go:build tools

// Package tools pins the Kubernetes API server and scheduler that the
// Kubernetes-target tests run against; scripts/kube-up.sh builds them from
// this module.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
