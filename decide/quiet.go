package decide

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// quietService is a service whose steps decided nothing in a pass (no
// replica made, deleted or retired, no event, its memory as it was): the
// pass's time, and the earliest deadline the steps compared the time
// with (zero: none). The next pass skips the service's steps while
// nothing they read changed (its spec, its replicas, its memory entries,
// the Secrets' revisions) and the deadline has not come:
// they would decide nothing again. At 5,000 services and 500,000
// replicas the steps took a third of a pass after a lone change.
type quietService struct {
	at, wake time.Time
}

// quietServices are the last pass's quiet services that this pass may
// skip (nil: none). The steps read the clusters only to delete a replica,
// which a quiet service does not; busy services and a clock that went
// back are not skipped, though no step before makes them busy yet.
func (p *Pass) quietServices(busy map[string]bool) map[string]quietService {
	prev, changed := p.snap.Booked, p.snap.Changed
	if prev == nil || changed == nil || !p.index.ordered || !maps.Equal(prev.secrets, p.snap.SecretRevisions) {
		return nil
	}
	touched := changed.servicesTouched()
	// The pass consumes the booking it was handed: its map, not a copy,
	// without the services gone since.
	out := prev.quiet
	if out == nil {
		out = map[string]quietService{}
	}
	maps.DeleteFunc(out, func(name string, q quietService) bool {
		return touched[name] || changed.Services[name] || busy[name] || p.services[name] == nil ||
			p.now.Before(q.at) || !q.wake.IsZero() && !p.now.Before(q.wake)
	})
	return out
}

// busyServices are the services whose replicas the pass copied or
// deleted before their steps: their steps read what the pass did.
func (p *Pass) busyServices() map[string]bool {
	busy := map[string]bool{}
	for r := range p.mine {
		busy[r.Service] = true
	}
	for id := range p.deleting {
		if r := p.runningReplica(id); r != nil {
			busy[r.Service] = true
		}
	}
	return busy
}

// stepService runs a service's steps, and notes it quiet if they decided
// nothing.
func (p *Pass) stepService(svc *api.Service, replicas []*api.Replica, byID, busy bool) {
	name := svc.Metadata.Name
	steps, revisions, wake := p.plan.serviceSteps(), len(p.mem.Revisions), p.plan.Wake.At
	p.plan.Wake.At = time.Time{}
	p.deployService(svc, replicas, byID, busy)
	own := p.plan.Wake.At
	p.plan.Wake.At = wake
	if !own.IsZero() {
		p.plan.Wake.at(own)
	}
	if !busy && steps == p.plan.serviceSteps() && revisions == len(p.mem.Revisions) && p.keptMemoryOf(name) {
		p.quiet[name] = quietService{at: p.now, wake: own}
	}
}

// serviceSteps counts what a service's steps add to a plan.
func (pl *Plan) serviceSteps() int {
	return len(pl.CreateReplicas) + len(pl.DeleteReplicas) + len(pl.RetireReplicas) + len(pl.EndMoves) + len(pl.Reverts) + len(pl.Events)
}

// keptMemoryOf: the service's deployment, promotion and current revision
// are in the pass's memory as they were in its input (the steps prune
// revisions only as a deployment changes; stepService also counts them).
func (p *Pass) keptMemoryOf(name string) bool {
	d, had := p.in.Deployments[name]
	_, promoted := p.in.Promotions[name]
	// A section the pass has not copied is its input's map: each entry is
	// as it was, without a deep comparison (a revision holds a spec).
	if !had || promoted || p.owns.deployments && !reflect.DeepEqual(d, p.mem.Deployments[name]) {
		return false
	}
	key := RevisionKey(name, d.Revision)
	return !p.owns.revisions || reflect.DeepEqual(p.in.Revisions[key], p.mem.Revisions[key])
}

// replicasOf are the pass's replicas of a service: a run of its list in
// the store's order (byID: then they are by id), else from groups made
// once. The run's ends are binary searched: walking to its end read each
// of a large service's replicas. Replicas the pass made (at the list's
// end, past the store's order) are looked for among those alone while
// that costs no more than the groups' walk of every replica: once a
// service scaled up, each service after it walked them all (a fiftieth
// of a 1,000-machine day).
func (p *Pass) replicasOf(name string, groups *map[string][]*api.Replica) (replicas []*api.Replica, byID bool) {
	sorted := p.index.sorted
	if !p.index.ordered || *groups != nil || (len(p.replicas)-sorted)*len(p.snap.Services) > len(p.replicas) {
		if *groups == nil {
			*groups = groupByService(p.replicas)
		}
		return (*groups)[name], false
	}
	from, _ := slices.BinarySearchFunc(p.replicas[:sorted], name, func(r *api.Replica, s string) int { return strings.Compare(r.Service, s) })
	n, _ := slices.BinarySearchFunc(p.replicas[from:sorted], name, func(r *api.Replica, s string) int {
		if r.Service == s {
			return -1 // the end is past every replica of the service
		}
		return 1
	})
	run := p.replicas[from : from+n : from+n]
	for _, r := range p.replicas[sorted:] {
		if r.Service == name {
			replicas = append(replicas, r)
		}
	}
	if replicas == nil {
		return run, true
	}
	return append(run, replicas...), false
}
