package decide

import (
	"cmp"
	"fmt"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/target"
)

// pods is the target of clusters whose replicas run as Pods in an existing
// Kubernetes cluster. Kubernetes places the Pods on its nodes; this target
// decides what Gantry must: that a replica gets its Pod (named after it,
// in the cluster's namespace), and with which isolation, since a TEE
// policy needs a RuntimeClass the cluster may not have. Each cluster's
// watch (package target/kube, in the server) applies the Pods of placed
// replicas and reports their state.
type pods struct{}

// KubernetesObservation is what a Kubernetes cluster's watch knows
// (package target: the watches make it, decisions read it).
type KubernetesObservation = target.KubernetesObservation

// Decide places the clusters' pending replicas as Pods and keeps each
// cluster's KubernetesReady condition.
func (pods) Decide(p *Pass, clusters []string) {
	for _, name := range clusters {
		obs, watched := p.snap.Kubernetes[name]
		if watched {
			p.setKubernetesReady(name, obs)
		}
		settings, errs := spec.KubernetesConfig(p.snap.Clusters[name].Spec.Provider)
		for _, r := range p.replicas {
			svc, ok := p.services[r.Service]
			if !ok || r.Cluster != name || r.Pod != "" || r.Machine != "" || p.deleting[r.ID] {
				continue
			}
			if errs != nil {
				p.plan.Pending[r.ID] = "cluster " + name + ": " + errs.Error()
				continue
			}
			p.placePod(r, p.specOf(r, svc), settings, obs)
		}
	}
}

// placePod places a replica as a Pod, or says why it waits.
func (p *Pass) placePod(r *api.Replica, sp api.ServiceSpec, s spec.KubernetesSettings, obs KubernetesObservation) {
	hasClass := obs.RuntimeClassesListed && obs.RuntimeClasses[s.RuntimeClass]
	pl := replica.Placement{Pod: s.Namespace + "/" + r.ID}
	switch sp.Isolation {
	case api.IsolationTEERequired:
		switch {
		case hasClass:
			pl.TEE = true
		case !obs.RuntimeClassesListed:
			p.plan.Pending[r.ID] = fmt.Sprintf("waiting to learn whether cluster %s has RuntimeClass %q (teeRequired): %s", r.Cluster, s.RuntimeClass, cmp.Or(obs.ListError, "not listed yet"))
			return
		default:
			p.plan.Pending[r.ID] = fmt.Sprintf("prerequisite missing: cluster %s has no RuntimeClass %q, which teeRequired needs", r.Cluster, s.RuntimeClass)
			return
		}
	case api.IsolationTEEPreferred:
		pl.TEE = hasClass
		if !hasClass {
			why := "no RuntimeClass " + fmt.Sprintf("%q", s.RuntimeClass) + " in the cluster"
			if !obs.RuntimeClassesListed {
				why = "its RuntimeClasses could not be listed (" + cmp.Or(obs.ListError, "not listed yet") + ")"
			}
			pl.Note = "teePreferred: runs without TEE isolation: " + why
		}
	}
	p.plan.Assignments = append(p.plan.Assignments, Assignment{Replica: r.ID, Placement: pl})
	// The pass sees it placed: later steps must not count it pending.
	_ = replica.Assign(r, pl, false, p.now)
}

// setKubernetesReady records whether the cluster's API server takes
// Gantry's calls, with an event when that changes.
func (p *Pass) setKubernetesReady(cluster string, obs KubernetesObservation) {
	status, reason, message, at := "True", "", "", p.now
	if obs.Error != "" {
		status, reason, message, at = "False", kubernetesReason(obs.ErrKind), obs.Error, obs.At
	}
	key := ConditionKey(cluster, api.ConditionKubernetesReady)
	prev, had := p.mem.Conditions[key]
	if had && prev.Status == status && prev.Message == message {
		return
	}
	p.mem.Conditions[key] = api.Condition{Type: api.ConditionKubernetesReady, Status: status, Reason: reason, Message: message, LastTransitionTime: at.UTC()}
	switch {
	case status == "False" && (!had || prev.Status != status):
		p.event(api.EventWarning, api.ConditionKubernetesReady, api.KindCluster, cluster, "the Kubernetes API server fails Gantry's calls ("+reason+"): "+message)
	case status == "True" && had:
		p.event(api.EventNormal, api.ConditionKubernetesReady, api.KindCluster, cluster, "the Kubernetes API server takes Gantry's calls again")
	}
}

// kubernetesReason is the condition's reason for an error kind.
func kubernetesReason(kind provisioner.ErrorKind) string {
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
