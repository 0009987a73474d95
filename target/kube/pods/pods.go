// Package pods is the decide side of the Kubernetes target, pure: the Pod
// a replica gets (named after it, in the cluster's namespace) and with
// which isolation, since a TEE policy needs a RuntimeClass the cluster
// may not have; and whether the cluster's API server takes Gantry's
// calls. Kubernetes places the Pods on its nodes. Package decide calls it
// in its pass; package kube (the act side) applies the Pods and reports
// their state.
package pods

import (
	"cmp"
	"fmt"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/target"
)

// Place is the Pod a replica runs as, or why it waits (placement unset).
func Place(r *api.Replica, sp api.ServiceSpec, s spec.KubernetesSettings, obs target.KubernetesObservation) (pl replica.Placement, waiting string) {
	hasClass := obs.RuntimeClassesListed && obs.RuntimeClasses[s.RuntimeClass]
	pl = replica.Placement{Pod: s.Namespace + "/" + r.ID}
	switch sp.Isolation {
	case api.IsolationTEERequired:
		switch {
		case hasClass:
			pl.TEE = true
		case !obs.RuntimeClassesListed:
			return replica.Placement{}, fmt.Sprintf("waiting to learn whether cluster %s has RuntimeClass %q (teeRequired): %s", r.Cluster, s.RuntimeClass, cmp.Or(obs.ListError, "not listed yet"))
		default:
			return replica.Placement{}, fmt.Sprintf("prerequisite missing: cluster %s has no RuntimeClass %q, which teeRequired needs", r.Cluster, s.RuntimeClass)
		}
	case api.IsolationTEEPreferred:
		pl.TEE = hasClass
		if !hasClass {
			why := fmt.Sprintf("no RuntimeClass %q in the cluster", s.RuntimeClass)
			if !obs.RuntimeClassesListed {
				why = "its RuntimeClasses could not be listed (" + cmp.Or(obs.ListError, "not listed yet") + ")"
			}
			pl.Note = "teePreferred: runs without TEE isolation: " + why
		}
	}
	return pl, ""
}

// Ready is the cluster's KubernetesReady condition as its watch sees it
// now: True, or False with the failed call's kind, message and time.
func Ready(obs target.KubernetesObservation, now time.Time) api.Condition {
	if obs.Error == "" {
		return api.Condition{Type: api.ConditionKubernetesReady, Status: "True", LastTransitionTime: now.UTC()}
	}
	return api.Condition{Type: api.ConditionKubernetesReady, Status: "False", Reason: Reason(obs.ErrKind), Message: obs.Error, LastTransitionTime: obs.At.UTC()}
}

// Reason is the condition's reason for a failed call's kind.
func Reason(kind provisioner.ErrorKind) string {
	switch kind {
	case provisioner.KindAuth:
		return "Unauthorized"
	case provisioner.KindForbidden:
		return "Forbidden"
	case provisioner.KindNotFound:
		return "NotFound"
	case provisioner.KindConflict:
		return "Conflict"
	case provisioner.KindInvalid:
		return "Invalid"
	case provisioner.KindTransport:
		return "Unreachable"
	}
	return "Failed"
}
