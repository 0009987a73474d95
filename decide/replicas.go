package decide

import (
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/spec"
)

// syncReplicas gives every service one replica per index, deletes those
// beyond its count (their agent stops them), and follows spec changes: a
// change of requests or cluster sends the replica back to the scheduler,
// any other change reaches its agent through the spec hash.
func (p *Pass) syncReplicas() {
	wanted := map[string]bool{}
	for _, svc := range p.snap.Services {
		hash, requests := spec.RuntimeHash(svc.Spec, p.snap.SecretRevisions), spec.Requests(svc.Spec)
		name := svc.Metadata.Name
		for i := 0; i < svc.Spec.DesiredReplicas(); i++ {
			id := replica.ID(name, i)
			wanted[id] = true
			r, ok := p.replicaByID[id]
			if !ok {
				r = replica.New(id, name, svc.Spec.Cluster, i, hash, requests, p.now)
				p.plan.CreateReplicas = append(p.plan.CreateReplicas, r)
				p.addReplica(r)
				continue
			}
			if r.SpecHash == hash && r.Requests == requests && r.Cluster == svc.Spec.Cluster {
				continue
			}
			p.plan.UpdateReplicas = append(p.plan.UpdateReplicas, ReplicaUpdate{ID: id, Service: name, SpecHash: hash, Requests: requests, Cluster: svc.Spec.Cluster})
			replica.Follow(r, hash, requests, svc.Spec.Cluster, p.now)
		}
	}
	kept := p.replicas[:0]
	for _, r := range p.replicas {
		if wanted[r.ID] {
			kept = append(kept, r)
			continue
		}
		p.plan.DeleteReplicas = append(p.plan.DeleteReplicas, ReplicaDelete{ID: r.ID, Service: r.Service})
		delete(p.replicaByID, r.ID)
	}
	p.replicas = kept
}
