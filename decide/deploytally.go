package decide

import (
	"slices"
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/replica"
)

// deployTally is what a complete deployment's step counted of a service
// whose replicas were all of its revision, each index held: the next pass
// takes it over, counting again only the replicas that changed since,
// while its deployment is complete at the same revision and its replicas'
// membership is as the tally left it. A replica starting or failing
// touched its service, whose step walked every replica to count them
// again (1,500 a service at 10,000 machines); so did each change of the
// desired count, once a minute for each service of a diurnal trace,
// which the kept tally now follows too (rescale). The decision harness
// decides every pass afresh too.
type deployTally struct {
	revision string
	desired  int
	// replicas is how many the service has once the pass's steps hold
	// (those it made counted, those it deleted or retired not); unready
	// are those not ready; dropped are those it does not count that may
	// still change: retiring, or deleted since.
	replicas int
	unready  map[string]bool
	dropped  map[string]bool
}

// keptTally is the last pass's tally of the service (t), counted again for
// the replicas changed since and those the pass changed before its steps
// (busy: the moves it ended), when it holds (nil: walk them): the pass
// deleted none of the service's replicas before, the store holds
// what the last pass made or changed of them (each is among the changes,
// counted again), the deployment is complete at the same revision, no
// promotion waits, and every changed replica of the service is there
// (but those the last pass dropped), of the revision, within the tally's
// desired count, and as many as the tally says.
func (p *Pass) keptTally(svc *api.Service, rev api.Revision, d *api.Deployment, replicas []*api.Replica, busy bool, t *deployTally) *deployTally {
	prev, changed := p.snap.Booked, p.snap.Changed
	name := svc.Metadata.Name
	if prev == nil || changed == nil || t == nil || d.State != api.DeployComplete || d.Revision != rev.Hash || t.revision != rev.Hash || len(replicas) != t.replicas {
		return nil
	}
	if _, promoted := p.in.Promotions[name]; promoted {
		return nil
	}
	prefix := name + "-" // a replica's id begins with its service's name and a dash
	for id := range prev.own {
		if _, written := changed.Replicas[id]; strings.HasPrefix(id, prefix) && !written {
			return nil
		}
	}
	if busy && !p.countOwn(t, name, rev) {
		return nil
	}
	for id, was := range changed.Replicas {
		if was.Service != name {
			continue
		}
		r := p.replica(id)
		if r == nil && t.dropped[id] { // retiring or deleted, not counted
			if !p.idRetiring(id) {
				delete(t.dropped, id)
			}
			continue
		}
		if !countAgain(t, name, rev, r) {
			return nil
		}
	}
	return t
}

// countOwn counts again the service's replicas the pass changed before
// its steps (false: it deleted one, or one is not counted: walk them).
// Before the steps, a pass only ends moves, which leave a replica
// available as it was.
func (p *Pass) countOwn(t *deployTally, name string, rev api.Revision) bool {
	for id := range p.deleting {
		if r := p.runningReplica(id); r == nil || r.Service == name {
			return false
		}
	}
	for r := range p.mine {
		if r.Service == name && !countAgain(t, name, rev, r) {
			return false
		}
	}
	return true
}

// countAgain counts a replica of the service again in its tally (false:
// it is not one the tally counts, nil if gone).
func countAgain(t *deployTally, name string, rev api.Revision, r *api.Replica) bool {
	if r == nil || r.Service != name || r.SpecHash != rev.Hash || r.Index < 0 || r.Index >= t.desired {
		return false
	}
	if availableOf(rev, r) {
		delete(t.unready, r.ID)
	} else {
		t.unready[r.ID] = true
	}
	return true
}

// rescale follows the tally to the service's desired count as the step's
// walk would: the replicas of the indexes a scale-down drops are deleted
// or retired (in the order of their ids), or those of the indexes a
// scale-up adds are made. It needs each index held by one replica, and
// finds each dropped one by the id its index gives (false, having changed
// nothing, when one is not there: the step walks then).
func (p *Pass) rescale(t *deployTally, rev api.Revision, desired int) bool {
	if t.replicas != t.desired {
		return false
	}
	if desired < t.desired {
		drop := make([]*api.Replica, 0, t.desired-desired)
		for i := max(desired, 0); i < t.desired; i++ {
			r := p.replica(replica.ID(rev.Service, i))
			if r == nil || r.Index != i || r.SpecHash != rev.Hash {
				return false
			}
			drop = append(drop, r)
		}
		slices.SortFunc(drop, func(a, b *api.Replica) int { return strings.Compare(a.ID, b.ID) })
		if t.dropped == nil {
			t.dropped = make(map[string]bool, len(drop))
		}
		for _, r := range drop {
			p.deleteReplica(r, "service scaled down")
			t.dropped[r.ID] = true
			delete(t.unready, r.ID)
		}
		t.replicas -= len(drop)
	}
	for i := t.desired; i < desired; i++ {
		r := p.createReplica(rev, i)
		if !availableOf(rev, r) {
			t.unready[r.ID] = true
		}
		t.replicas++
	}
	t.desired = desired
	return true
}

// retiringOf are the ids of the service's retiring replicas (a run of
// the pass's retiring ones, which are in the store's order).
func (p *Pass) retiringOf(service string) map[string]bool {
	out := map[string]bool{}
	from, _ := slices.BinarySearchFunc(p.retiring, service, func(r *api.Replica, s string) int { return strings.Compare(r.Service, s) })
	for _, r := range p.retiring[from:] {
		if r.Service != service {
			break
		}
		out[r.ID] = true
	}
	return out
}

// availableOf: a replica of rev runs and passes rev's health check,
// where it has one (what makes it ready once its deployment is
// complete).
func availableOf(rev api.Revision, r *api.Replica) bool {
	return replica.Available(r) && (rev.Spec.HealthCheck == nil || r.Health == api.HealthHealthy)
}

// keepTallies takes the last pass's tallies over (its booking's map,
// which the pass consumes), but for services gone, which are among the
// changes (the step of each service stepped replaces its own). A copy
// each pass was a hundredth of a 1,000-machine month.
func (p *Pass) keepTallies() map[string]*deployTally {
	prev, changed := p.snap.Booked, p.snap.Changed
	if prev == nil || changed == nil || prev.tallies == nil {
		return map[string]*deployTally{}
	}
	for name := range changed.Services {
		if p.services[name] == nil {
			delete(prev.tallies, name)
		}
	}
	return prev.tallies
}
