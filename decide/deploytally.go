package decide

import (
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/replica"
)

// deployTally is what a complete deployment's step counted of a service
// whose replicas were all of its revision, each index held, none deleted:
// the next pass takes it over, counting again only the replicas that
// changed since, while the service, its deployment and its replicas'
// membership are as they were. A replica starting or failing touched its
// service, whose step walked every replica to count them again (1,500 a
// service at 10,000 machines). The decision harness decides every pass
// afresh too.
type deployTally struct {
	revision   string
	desired    int
	generation int64
	// replicas is how many the service had; unready are those not ready.
	replicas int
	unready  map[string]bool
}

// keptTally is the last pass's tally of the service, counted again for
// the replicas changed since, when it holds (nil: walk them): the pass
// changed none of the service's replicas before (busy), the last pass
// made or changed none it might not have written, the deployment is
// complete at the same revision, desired count and generation, no
// promotion waits, and every changed replica of the service is there,
// of the revision, within the desired count, and as many as before.
func (p *Pass) keptTally(svc *api.Service, rev api.Revision, d *api.Deployment, replicas []*api.Replica, busy bool) *deployTally {
	prev, changed := p.snap.Booked, p.snap.Changed
	name := svc.Metadata.Name
	if busy || prev == nil || changed == nil || prev.tallies == nil {
		return nil
	}
	t := prev.tallies[name]
	desired := svc.Spec.DesiredReplicas()
	if t == nil || d.State != api.DeployComplete || d.Revision != rev.Hash || t.revision != rev.Hash || t.desired != desired ||
		t.generation != svc.Metadata.Generation || len(replicas) != t.replicas {
		return nil
	}
	if _, promoted := p.in.Promotions[name]; promoted {
		return nil
	}
	prefix := name + "-" // a replica's id begins with its service's name and a dash
	for id := range prev.own {
		if strings.HasPrefix(id, prefix) {
			return nil
		}
	}
	for id, was := range changed.Replicas {
		if was.Service != name {
			continue
		}
		r := p.replica(id)
		if r == nil || r.Service != name || r.SpecHash != rev.Hash || r.Index < 0 || r.Index >= desired {
			return nil
		}
		if availableOf(rev, r) {
			delete(t.unready, id)
		} else {
			t.unready[id] = true
		}
	}
	return t
}

// availableOf: a replica of rev runs and passes rev's health check,
// where it has one (what makes it ready once its deployment is
// complete).
func availableOf(rev api.Revision, r *api.Replica) bool {
	return replica.Available(r) && (rev.Spec.HealthCheck == nil || r.Health == api.HealthHealthy)
}

// keepTallies carries the last pass's tallies over to the pass's booking,
// but for services gone (the step of each service stepped replaces its
// own).
func (p *Pass) keepTallies() map[string]*deployTally {
	var prev map[string]*deployTally
	if p.snap.Booked != nil && p.snap.Changed != nil {
		prev = p.snap.Booked.tallies
	}
	out := make(map[string]*deployTally, len(prev))
	for name, t := range prev {
		if p.services[name] != nil {
			out[name] = t
		}
	}
	return out
}
