package decide

import (
	"fmt"
	"sort"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/spec"
)

// syncReplicas keeps every service's replicas in line with its spec: one
// per index of its current revision, reached through a deployment
// (deploy.go). Replicas of deleted services go (their agent stops them).
func (p *Pass) syncReplicas() {
	services := make([]*api.Service, 0, len(p.snap.Services))
	services = append(services, p.snap.Services...)
	sort.Slice(services, func(i, j int) bool { return services[i].Metadata.Name < services[j].Metadata.Name })
	byService := map[string][]*api.Replica{}
	for _, r := range p.replicas {
		byService[r.Service] = append(byService[r.Service], r)
	}
	for _, svc := range services {
		p.deployService(svc, byService[svc.Metadata.Name])
	}
	for _, r := range p.replicas {
		if p.services[r.Service] == nil {
			p.deleteReplica(r, "service "+r.Service+" was deleted")
		}
	}
	p.dropDeleted()
}

// createReplica adds a pending replica of a revision at an index. Its id
// is service-index while that is free (and service-index-rN, N the
// revision, while an older replica of the index still holds it).
func (p *Pass) createReplica(rev api.Revision, index int) *api.Replica {
	id := replica.ID(rev.Service, index)
	for n := 0; p.replicaByID[id] != nil; n++ {
		id = fmt.Sprintf("%s-r%d", replica.ID(rev.Service, index), rev.Number)
		if n > 0 {
			id = fmt.Sprintf("%s-r%d-%d", replica.ID(rev.Service, index), rev.Number, n)
		}
	}
	r := replica.New(id, rev.Service, rev.Spec.Cluster, index, rev.Hash, spec.Requests(rev.Spec), p.now)
	p.plan.CreateReplicas = append(p.plan.CreateReplicas, r)
	p.addReplica(r)
	return r
}

// deleteReplica removes a replica (its agent stops it); the pass drops
// it at the end of syncReplicas.
func (p *Pass) deleteReplica(r *api.Replica, why string) {
	if p.deleting[r.ID] {
		return
	}
	p.deleting[r.ID] = true
	p.plan.DeleteReplicas = append(p.plan.DeleteReplicas, ReplicaDelete{ID: r.ID, Service: r.Service, Reason: why})
}

func (p *Pass) dropDeleted() {
	kept := p.replicas[:0]
	for _, r := range p.replicas {
		if p.deleting[r.ID] {
			delete(p.replicaByID, r.ID)
			continue
		}
		kept = append(kept, r)
	}
	p.replicas = kept
}
