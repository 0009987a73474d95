package decide

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/spec"
)

// syncReplicas keeps every service's replicas in line with its spec: one
// per index of its current revision, reached through a deployment
// (deploy.go). Replicas of deleted services go (their agent stops them).
//
// A service the last pass found quiet is skipped while nothing its steps
// read changed (quiet.go).
func (p *Pass) syncReplicas() {
	services := p.snap.Services
	byName := func(a, b *api.Service) int { return strings.Compare(a.Metadata.Name, b.Metadata.Name) }
	if !slices.IsSortedFunc(services, byName) {
		services = slices.SortedFunc(slices.Values(services), byName)
	}
	busy := p.busyServices()
	skip := p.quietServices(busy)
	if skip != nil {
		p.quiet = skip // the skipped services stay quiet: the pass's own map
	}
	var groups map[string][]*api.Replica
	for _, svc := range services {
		name := svc.Metadata.Name
		if q, ok := skip[name]; ok {
			if !q.wake.IsZero() {
				p.plan.Wake.at(q.wake)
			}
			continue
		}
		replicas, byID := p.replicasOf(name, &groups)
		p.stepService(svc, replicas, byID, busy[name])
	}
	p.deleteOrphans()
	p.dropDeleted()
}

// deleteOrphans deletes the replicas of deleted services. In the
// store's order the replicas of a service are a run, skipped by a binary
// search; when the snapshot names the orphaned services, only their runs
// are looked for.
func (p *Pass) deleteOrphans() {
	sorted := 0
	if p.index.ordered {
		sorted = p.index.sorted
	}
	if p.snap.Orphaned != nil {
		p.deleteRunsOf(p.snap.Orphaned, p.replicas[:sorted])
	} else {
		p.deleteOrphanedRuns(p.replicas[:sorted])
	}
	for _, r := range p.replicas[sorted:] {
		if p.services[r.Service] == nil {
			p.deleteReplica(r, "service "+r.Service+" was deleted")
		}
	}
}

// deleteOrphanedRuns deletes the replicas of deleted services among
// replicas, which are by service: each service's run is skipped by a
// binary search.
func (p *Pass) deleteOrphanedRuns(replicas []*api.Replica) {
	for i := 0; i < len(replicas); {
		run := replicas[i:]
		service := run[0].Service
		n, _ := slices.BinarySearchFunc(run, service, func(r *api.Replica, s string) int {
			return cmp.Or(strings.Compare(r.Service, s), -1) // ends at the first of a later service
		})
		if p.services[service] == nil {
			for _, r := range run[:n] {
				p.deleteReplica(r, "service "+r.Service+" was deleted")
			}
		}
		i += n
	}
}

// deleteRunsOf deletes the replicas of the named services (deleted ones)
// among replicas, which are by service.
func (p *Pass) deleteRunsOf(services []string, replicas []*api.Replica) {
	for _, service := range services {
		if p.services[service] != nil {
			continue
		}
		from, _ := slices.BinarySearchFunc(replicas, service, func(r *api.Replica, s string) int { return strings.Compare(r.Service, s) })
		for _, r := range replicas[from:] {
			if r.Service != service {
				break
			}
			p.deleteReplica(r, "service "+r.Service+" was deleted")
		}
	}
}

// groupByService groups replicas by service. They come in the store's
// order, by service, so each group is a run of the list (clipped: an
// append copies it), not a list built one append at a time.
func groupByService(replicas []*api.Replica) map[string][]*api.Replica {
	out := map[string][]*api.Replica{}
	for i := 0; i < len(replicas); {
		j := i + 1
		for j < len(replicas) && replicas[j].Service == replicas[i].Service {
			j++
		}
		name := replicas[i].Service
		if prev, ok := out[name]; ok {
			out[name] = append(slices.Clip(prev), replicas[i:j]...)
		} else {
			out[name] = replicas[i:j:j]
		}
		i = j
	}
	return out
}

// createReplica adds a pending replica of a revision at an index. Its id
// is service-index while that is free (and service-index-rN, N the
// revision, while an older replica of the index still holds it).
func (p *Pass) createReplica(rev api.Revision, index int) *api.Replica {
	id := replica.ID(rev.Service, index)
	for n := 0; p.replica(id) != nil || p.idRetiring(id); n++ {
		id = fmt.Sprintf("%s-r%d", replica.ID(rev.Service, index), rev.Number)
		if n > 0 {
			id = fmt.Sprintf("%s-r%d-%d", replica.ID(rev.Service, index), rev.Number, n)
		}
	}
	r := replica.New(id, rev.Service, rev.Spec.Cluster, index, rev.Hash, p.requestsOf(rev.Spec), p.now)
	p.plan.CreateReplicas = append(p.plan.CreateReplicas, r)
	p.addReplica(r)
	return r
}

// requestsOf is spec.Requests, parsed once a pass for each set of
// resources (parsing quantities allocates; a scale-up makes hundreds of
// replicas of one spec).
func (p *Pass) requestsOf(s api.ServiceSpec) api.Resources {
	key := requestsKey{cpu: s.Resources.CPU, memory: s.Resources.Memory, ephemeral: s.Resources.EphemeralStorage}
	if g := s.Resources.GPU; g != nil && g.Policy == api.GPURequired {
		key.gpus = g.Count
	}
	if r, ok := p.requests[key]; ok {
		return r
	}
	r := spec.Requests(s)
	if p.requests == nil {
		p.requests = map[requestsKey]api.Resources{}
	}
	p.requests[key] = r
	return r
}

// requestsKey is what spec.Requests reads of a spec.
type requestsKey struct {
	cpu, memory, ephemeral string
	gpus                   int
}

// deleteReplica removes a replica (its agent stops it); the pass drops
// it at the end of syncReplicas. A replica that may be taking traffic
// retires first: out of its name, stopped once drained.
func (p *Pass) deleteReplica(r *api.Replica, why string) {
	if p.deleting[r.ID] {
		return
	}
	p.deleting[r.ID] = true
	step := ReplicaDelete{ID: r.ID, Service: r.Service, Reason: why}
	if p.drainOf(r) > 0 && r.State == api.ReplicaRunning && r.Machine != "" && targetOf(p.cluster(r.Cluster)) == (machines{}) {
		p.plan.RetireReplicas = append(p.plan.RetireReplicas, step)
		return
	}
	p.plan.DeleteReplicas = append(p.plan.DeleteReplicas, step)
}

// idRetiring: a retiring replica holds id (until it is deleted).
func (p *Pass) idRetiring(id string) bool {
	return slices.ContainsFunc(p.retiring, func(r *api.Replica) bool { return r.ID == id })
}

// drainOf is how long a replica stays out of its name before it stops.
func (p *Pass) drainOf(r *api.Replica) time.Duration {
	if svc := p.services[r.Service]; svc != nil {
		return svc.Spec.Update.Drain()
	}
	return api.UpdatePolicy{}.Drain()
}

// cluster is a cluster of the snapshot (an empty one when deleted: its
// replicas are machines' to stop).
func (p *Pass) cluster(name string) *api.Cluster {
	if c := p.snap.Clusters[name]; c != nil {
		return c
	}
	return &api.Cluster{}
}

// drained: a retiring replica has been out of its name long enough.
func (p *Pass) drained(r *api.Replica) bool {
	return p.reached(r.RetiringSince.Add(p.drainOf(r)))
}

// retiringCount is how many replicas of service run out of their name:
// retired by an earlier pass and not drained yet, or by this one.
func (p *Pass) retiringCount(service string) int {
	n := 0
	for _, r := range p.retiring {
		if r.Service == service && !p.drained(r) {
			n++
		}
	}
	for _, d := range p.plan.RetireReplicas {
		if d.Service == service {
			n++
		}
	}
	return n
}

// finishRetiring deletes the retiring replicas that have drained.
func (p *Pass) finishRetiring() {
	for _, r := range p.retiring {
		if p.drained(r) {
			p.plan.DeleteReplicas = append(p.plan.DeleteReplicas, ReplicaDelete{ID: r.ID, Service: r.Service,
				Reason: fmt.Sprintf("drained for %s: %s", p.drainOf(r), r.RetireReason)})
		}
	}
}

// finishHandovers stops the old copies of moved replicas once drained:
// out of the endpoints since the new copy ran, for drainSeconds.
func (p *Pass) finishHandovers() {
	candidates := p.replicas
	if p.snap.Moving != nil {
		candidates = p.replicasAmong(p.snap.Moving)
	}
	for _, r := range candidates {
		if replica.Draining(r) && p.reached(r.HandedOverAt.Add(p.drainOf(r))) {
			p.plan.EndMoves = append(p.plan.EndMoves, r.ID)
			if !p.mine[r] {
				p.endedMoves = append(p.endedMoves, r)
			}
			replica.EndMove(p.own(r))
		}
	}
}

func (p *Pass) dropDeleted() {
	if len(p.deleting) == 0 {
		return
	}
	// By their positions, found by id: not every replica's id compared
	// with the ids deleted.
	drop := make([]int, 0, len(p.deleting))
	for id := range p.deleting {
		if i, ok := p.index.find(p.replicas, id); ok {
			drop = append(drop, i)
		}
	}
	slices.Sort(drop)
	p.replicas = p.index.without(p.replicas, drop)
}
