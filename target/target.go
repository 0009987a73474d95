// Package target holds what the targets of the control loop (its own
// machines, existing Kubernetes clusters) report to its decisions: the
// types both sides use, so that neither imports the other.
package target

import (
	"time"

	"github.com/gantry-dev/gantry/provisioner"
)

// KubernetesObservation is what a Kubernetes cluster's watch knows of it.
type KubernetesObservation struct {
	// RuntimeClassesListed: RuntimeClasses holds the cluster's
	// RuntimeClasses; otherwise ListError says why they are unknown.
	RuntimeClassesListed bool
	RuntimeClasses       map[string]bool
	ListError            string
	// ErrKind and Error are the last failed call to its API server, since
	// At; both are empty once a call succeeds again.
	ErrKind provisioner.ErrorKind
	Error   string
	At      time.Time
}
