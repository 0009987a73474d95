package view

import (
	"maps"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/replica"
)

// replicaCounts are counts the view keeps as replicas change, so that a
// reader need not walk every replica for them.
type replicaCounts struct {
	// oddIDs are the replicas whose ids do not begin with their service's
	// name and a dash (replica.ID makes none).
	oddIDs int
	// retiring are the replicas out of their names, running until drained.
	retiring int
	// pending are the replicas on no machine, by cluster.
	pending map[string]int
}

func newReplicaCounts(replicas []*api.Replica) replicaCounts {
	c := replicaCounts{pending: map[string]int{}}
	for _, r := range replicas {
		c.add(r, 1)
	}
	return c
}

// add counts r (n = 1) or stops counting it (n = -1); nil counts nothing.
func (c *replicaCounts) add(r *api.Replica, n int) {
	if r == nil {
		return
	}
	if !replica.NamedInService(r) {
		c.oddIDs += n
	}
	if r.RetiringSince != nil {
		c.retiring += n
	}
	if r.Machine == "" {
		c.pending[r.Cluster] += n
		if c.pending[r.Cluster] == 0 {
			delete(c.pending, r.Cluster)
		}
	}
}

// pendingByCluster is a copy of the pending counts.
func (c *replicaCounts) pendingByCluster() map[string]int { return maps.Clone(c.pending) }
