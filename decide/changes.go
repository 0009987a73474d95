package decide

import "strings"

// Changes is what changed in the store between the snapshot the last
// pass's Booking was made from and this one. The leader reads it from
// its view's log of the change feed; the decide harness from the objects
// it handed the last pass. It lets a pass find the machines and services
// a change touched without walking every replica. nil: not known, and
// the pass books every machine and steps every service.
type Changes struct {
	// Replicas are the replicas made, changed or deleted, by id.
	Replicas map[string]ReplicaWas
	// Services and Clusters are those made, changed or deleted.
	Services map[string]bool
	Clusters map[string]bool
	// Memory are the memory's entries written or dropped, by their keys
	// in the store.
	Memory map[string]bool
	// Machines are those made, changed or deleted, by id, but for
	// heartbeats held in memory (laid over the store's machines): nothing
	// booked reads a heartbeat. nil: not known, and the booking compares
	// every machine with the one it kept.
	Machines map[string]bool
}

// ReplicaWas is what a pass needs to know of a changed replica as it
// was: its service, and the machine it was on ("": none, or new).
type ReplicaWas struct {
	Service string
	Machine string
}

// NewChanges is an empty Changes, to note changes in.
func NewChanges() *Changes {
	return &Changes{Replicas: map[string]ReplicaWas{}, Services: map[string]bool{}, Clusters: map[string]bool{}, Memory: map[string]bool{},
		Machines: map[string]bool{}}
}

// Replica notes a replica of a service changed that was on machine
// before; the first note of a replica counts (the machine it was on at
// the start).
func (c *Changes) Replica(id, service, machine string) {
	if _, noted := c.Replicas[id]; !noted {
		c.Replicas[id] = ReplicaWas{Service: service, Machine: machine}
	}
}

// revision reports whether the memory's revision of that key changed.
func (c *Changes) revision(key string) bool { return c.Memory[revisionsPrefix+key] }

// servicesTouched are the services whose replicas or whose memory
// entries (deployment, promotion, revisions) changed.
func (c *Changes) servicesTouched() map[string]bool {
	out := map[string]bool{}
	for _, was := range c.Replicas {
		out[was.Service] = true
	}
	for key := range c.Memory {
		section, rest, _ := strings.Cut(key, "/")
		switch section + "/" {
		case DeploymentKey(""), PromotionKey(""), revisionsPrefix:
			service, _, _ := strings.Cut(rest, "/")
			out[service] = true
		}
	}
	return out
}
