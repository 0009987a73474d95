//go:build tools

// Package tools pins kwok, which simulates the nodes and kubelets of the
// Kubernetes-target tests; scripts/kube-up.sh builds it.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
