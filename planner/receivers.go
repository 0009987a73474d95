package planner

import (
	"math"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/scheduler"
)

// A session only fills the machines it is given: one that could take
// none of the replicas it places changes nothing it decides, when those
// replicas ask nothing of the machines they do not go on. Leaving such
// machines out spares copying, sorting and indexing them: at 10,000
// machines, mostly full, that was most of a session's time.

// asks is the least of each resource any of some replicas asks; ruled
// are the last rules found to ask nothing of other machines (the
// replicas of a run share theirs: reading each replica's was a cache
// miss for every replica of 10,000 machines).
type asks struct {
	least api.Resources
	ruled *scheduler.Rules
}

func newAsks() asks {
	return asks{least: api.Resources{MilliCPU: math.MaxInt64, MemoryBytes: math.MaxInt64, EphemeralBytes: math.MaxInt64}}
}

// add counts r; false when r asks something of the machines it does not
// go on (spread, same zone, affinity terms, preemption), which a session
// reads on every machine.
func (a *asks) add(r *scheduler.Replica) bool {
	if r.Rules == nil {
		return false
	}
	if r.Rules != a.ruled {
		if len(r.Spread) > 0 || r.SameZone || r.Terms != nil || r.Preempt {
			return false
		}
		a.ruled = r.Rules
	}
	a.least.MilliCPU = min(a.least.MilliCPU, r.Requests.MilliCPU)
	a.least.MemoryBytes = min(a.least.MemoryBytes, r.Requests.MemoryBytes)
	a.least.EphemeralBytes = min(a.least.EphemeralBytes, r.Requests.EphemeralBytes)
	return true
}

// mayTake: the machine could take one of the replicas, or teaches a
// session something: it has GPUs (devices are matched apart), a
// resident whose rules a session learns, or at least as much free as
// the least any replica asks of each resource.
func (a *asks) mayTake(m *Machine) bool {
	f := m.Free()
	return f.MilliCPU >= a.least.MilliCPU && f.MemoryBytes >= a.least.MemoryBytes && f.EphemeralBytes >= a.least.EphemeralBytes ||
		len(m.GPUs) > 0 || m.PlainResidents < len(m.Residents)
}

// mayReceive says which machines could take one of consolidation's
// candidates' replicas in a what-if (nil: any): a candidate, or one that
// may take one of them (asks). The what-ifs only fill the machines they
// do not remove.
func (p *planning) mayReceive(candidates []removable) func(int, *Machine) bool {
	if p.noShortcuts {
		return nil
	}
	a := newAsks()
	isCandidate := make([]bool, len(p.in.Machines)) // by place in the input
	for _, c := range candidates {
		isCandidate[c.at] = true
		for i := range c.m.Replicas {
			if !a.add(&c.m.Replicas[i]) {
				return nil
			}
		}
	}
	return func(i int, m *Machine) bool { return isCandidate[i] || a.mayTake(m) }
}

// placeReceivers says which live machines the placing sessions (place,
// then compaction and downsizing, which move only pending replicas) may
// put a pending replica on (nil: any).
func (p *planning) placeReceivers(pending []scheduler.Replica) func(*Machine) bool {
	if p.noShortcuts || p.wholeSessions {
		return nil
	}
	a := newAsks()
	for i := range pending {
		if !a.add(&pending[i]) {
			return nil
		}
	}
	return a.mayTake
}

// roomLeftOut counts the machines left out of the placing sessions, and
// their room: downsizing asks how much room every machine has.
type roomLeftOut struct {
	machines          int
	allocatable, free api.Resources
}

// shareMachines copies the input's machines that receives lets in (nil:
// every one) for the plan's session, in one allocation; each shares its
// counts of services and its devices with the input's until the session
// books or unbooks on it (which copies them first): most of a fleet's
// machines take nothing new in a plan.
func (p *planning) shareMachines(receives func(*Machine) bool) []*scheduler.Machine {
	in := p.in.Machines
	if receives != nil {
		in = make([]*Machine, 0, len(p.in.Machines))
		for _, m := range p.in.Machines {
			if receives(m) {
				in = append(in, m)
				continue
			}
			p.outOfPlace.machines++
			p.outOfPlace.allocatable = p.outOfPlace.allocatable.Add(m.Allocatable)
			p.outOfPlace.free = p.outOfPlace.free.Add(nonNegative(m.Free()))
		}
	}
	out := make([]*scheduler.Machine, len(in))
	copies := make([]scheduler.Machine, len(in)) // only as many as go in: a fleet's worth is zeroed otherwise
	for i, m := range in {
		m.ShareInto(&copies[i])
		out[i] = &copies[i]
	}
	return out
}
