package decide

import (
	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/target"
	"github.com/gantry-dev/gantry/target/kube/pods"
)

// podsTarget is the target of clusters whose replicas run as Pods in an
// existing Kubernetes cluster: the rule that hands their pending replicas
// to the target's decisions (package target/kube/pods) within the pass.
// Each cluster's watch (package target/kube) applies the Pods of placed
// replicas and reports their state.
type podsTarget struct{}

// KubernetesObservation is what a Kubernetes cluster's watch knows
// (package target: the watches make it, decisions read it).
type KubernetesObservation = target.KubernetesObservation

// Decide places the clusters' pending replicas as Pods and keeps each
// cluster's KubernetesReady condition.
func (podsTarget) Decide(p *Pass, clusters []string) {
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
				p.tellPending(r, "cluster "+name+": "+errs.Error())
				continue
			}
			p.placePod(r, p.specOf(r, svc), settings, obs)
		}
	}
}

// placePod places a replica as a Pod, or says why it waits.
func (p *Pass) placePod(r *api.Replica, sp api.ServiceSpec, s spec.KubernetesSettings, obs KubernetesObservation) {
	pl, waiting := pods.Place(r, sp, s, obs)
	if waiting != "" {
		p.tellPending(r, waiting)
		return
	}
	p.plan.Assignments = append(p.plan.Assignments, Assignment{Replica: r.ID, Placement: pl})
	// The pass sees it placed: later steps must not count it pending.
	_ = replica.Assign(p.own(r), pl, false, p.now)
}

// setKubernetesReady records whether the cluster's API server takes
// Gantry's calls, with an event when that changes.
func (p *Pass) setKubernetesReady(cluster string, obs KubernetesObservation) {
	cond := pods.Ready(obs, p.now)
	key := ConditionKey(cluster, api.ConditionKubernetesReady)
	prev, had := p.mem.Conditions[key]
	if had && prev.Status == cond.Status && prev.Message == cond.Message {
		return
	}
	p.mem.Conditions[key] = cond
	switch {
	case cond.Status == "False" && (!had || prev.Status != cond.Status):
		p.event(api.EventWarning, api.ConditionKubernetesReady, api.KindCluster, cluster, "the Kubernetes API server fails Gantry's calls ("+cond.Reason+"): "+cond.Message)
	case cond.Status == "True" && had:
		p.event(api.EventNormal, api.ConditionKubernetesReady, api.KindCluster, cluster, "the Kubernetes API server takes Gantry's calls again")
	}
}
