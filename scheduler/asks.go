package scheduler

import (
	"math"

	"github.com/gantry-dev/gantry/api"
)

// A session only fills the machines it is given: one that could take
// none of the replicas it places changes nothing it decides, when those
// replicas ask nothing of the machines they do not go on. Leaving such
// machines out spares copying, sorting and indexing them: at 10,000
// machines, mostly full, that was most of a session's time.

// Asks is the least of each resource any of some replicas asks; ruled
// are the last rules found to ask nothing of other machines (the
// replicas of a run share theirs: reading each replica's was a cache
// miss for every replica of 10,000 machines).
type Asks struct {
	least api.Resources
	ruled *Rules
	// refused: a replica counted asks something of other machines.
	refused bool
}

// NewAsks is the asks of no replica yet.
func NewAsks() Asks {
	return Asks{least: api.Resources{MilliCPU: math.MaxInt64, MemoryBytes: math.MaxInt64, EphemeralBytes: math.MaxInt64}}
}

// Add counts r; false when r asks something of the machines it does not
// go on (spread, same zone, affinity terms, preemption), which a session
// reads on every machine.
func (a *Asks) Add(r *Replica) bool {
	if a.refused || r.Rules == nil {
		a.refused = true
		return false
	}
	if r.Rules != a.ruled {
		if asksOthers(r) {
			a.refused = true
			return false
		}
		a.ruled = r.Rules
	}
	a.lower(r.Requests)
	return true
}

// asksOthers: r asks something of the machines it does not go on.
func asksOthers(r *Replica) bool {
	return len(r.Spread) > 0 || r.SameZone || r.Terms != nil || r.Preempt
}

// lower makes the least at most req.
func (a *Asks) lower(req api.Resources) {
	a.least.MilliCPU = min(a.least.MilliCPU, req.MilliCPU)
	a.least.MemoryBytes = min(a.least.MemoryBytes, req.MemoryBytes)
	a.least.EphemeralBytes = min(a.least.EphemeralBytes, req.EphemeralBytes)
}

// MayTake: the machine could take one of the replicas, or teaches a
// session something: it has GPUs (devices are matched apart), a
// resident whose rules a session learns, or at least as much free as
// the least any replica asks of each resource.
func (a *Asks) MayTake(m *Machine) bool { return a.MayTakeRoom(m.Room()) }

// MayTakeRoom is MayTake of a machine whose room is r.
func (a *Asks) MayTakeRoom(r Room) bool {
	f := r.Free
	return f.MilliCPU >= a.least.MilliCPU && f.MemoryBytes >= a.least.MemoryBytes && f.EphemeralBytes >= a.least.EphemeralBytes || r.Teaches
}

// Room is what MayTake reads of a machine, a few bytes a caller can keep
// beside a list of machines and read without touching each: what is
// free, and whether it teaches a session something whatever its room (it
// has GPUs, or a resident whose rules a session learns).
type Room struct {
	Free    api.Resources
	Teaches bool
}

// Room is the machine's room.
func (m *Machine) Room() Room {
	return Room{Free: m.Free(), Teaches: len(m.GPUs) > 0 || m.PlainResidents < len(m.Residents)}
}

// Merge counts the replicas b counted too; false when one of them asks
// something of other machines (as Add).
func (a *Asks) Merge(b *Asks) bool {
	if a.refused || b.refused {
		a.refused = true
		return false
	}
	a.lower(b.least)
	return true
}

// Counts reports whether a has counted r, or could have: it refuses, or
// r asks nothing of other machines and at least as much as a's least.
func (a *Asks) Counts(r *Replica) bool {
	if a.refused {
		return true
	}
	if r.Rules == nil || asksOthers(r) {
		return false
	}
	return a.least.MilliCPU <= r.Requests.MilliCPU && a.least.MemoryBytes <= r.Requests.MemoryBytes &&
		a.least.EphemeralBytes <= r.Requests.EphemeralBytes
}
