package decide

import "strings"

// Changes is what changed in the store between the snapshot the last
// pass's Booking was made from and this one. The leader reads it from
// its view's log of the change feed; the decide harness from the objects
// it handed the last pass. It lets a pass book afresh only the machines
// a change touched without walking every replica to find them. nil: not
// known, and the pass books every machine afresh.
type Changes struct {
	// Replicas are the replicas made, changed or deleted, each with the
	// machine it was on in the earlier snapshot ("": none, or new).
	Replicas map[string]string
	// Services and Clusters are those made, changed or deleted.
	Services map[string]bool
	Clusters map[string]bool
	// Revisions are the memory's revisions written or dropped, by
	// RevisionKey.
	Revisions map[string]bool
}

// NewChanges is an empty Changes, to note changes in.
func NewChanges() *Changes {
	return &Changes{Replicas: map[string]string{}, Services: map[string]bool{}, Clusters: map[string]bool{}, Revisions: map[string]bool{}}
}

// Replica notes a replica changed that was on machine before; the first
// note of a replica counts (the machine it was on at the start).
func (c *Changes) Replica(id, machine string) {
	if _, noted := c.Replicas[id]; !noted {
		c.Replicas[id] = machine
	}
}

// MemoryEntry notes a memory entry written or dropped, by its key in the
// store.
func (c *Changes) MemoryEntry(key string) {
	if k, ok := strings.CutPrefix(key, revisionsPrefix); ok {
		c.Revisions[k] = true
	}
}
