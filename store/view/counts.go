package view

import (
	"cmp"
	"maps"
	"slices"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/internal/sortedset"
	"github.com/gantry-dev/gantry/replica"
)

// replicaCounts are counts the view keeps as replicas change, so that a
// reader need not walk every replica for them.
type replicaCounts struct {
	// oddIDs are the replicas whose ids do not begin with their service's
	// name and a dash (replica.ID makes none).
	oddIDs int
	// retiring are the ids of the replicas out of their names, running
	// until drained.
	retiring *sortedset.Set
	// moving are the ids of the replicas moving off a machine
	// (PreviousMachine set).
	moving *sortedset.Set
	// pending are the replicas on no machine, by cluster; unplaced their
	// ids.
	pending  map[string]int
	unplaced *sortedset.Set
	// byService counts the replicas of each service named.
	byService map[string]int
	// orphans are the last orphaned list, still true while known: its
	// inputs (the services named and the services held) are the same.
	orphans      []string
	orphansKnown bool
}

func newReplicaCounts(replicas []*api.Replica) replicaCounts {
	c := replicaCounts{pending: map[string]int{}, unplaced: sortedset.New(), moving: sortedset.New(), retiring: sortedset.New(), byService: map[string]int{}}
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
		if n > 0 {
			c.retiring.Add(r.ID)
		} else {
			c.retiring.Remove(r.ID)
		}
	}
	if r.PreviousMachine != "" {
		if n > 0 {
			c.moving.Add(r.ID)
		} else {
			c.moving.Remove(r.ID)
		}
	}
	c.byService[r.Service] += n
	switch c.byService[r.Service] {
	case 0:
		delete(c.byService, r.Service)
		c.orphansKnown = false
	case n: // the first of its service
		c.orphansKnown = false
	}
	if r.Machine == "" {
		c.pending[r.Cluster] += n
		if c.pending[r.Cluster] == 0 {
			delete(c.pending, r.Cluster)
		}
		if n > 0 {
			c.unplaced.Add(r.ID)
		} else {
			c.unplaced.Remove(r.ID)
		}
	}
}

// movingIDs are the ids of the replicas moving off a machine, sorted (not
// nil), shared until they change.
func (c *replicaCounts) movingIDs() []string { return c.moving.Sorted() }

// retiringIDs are the ids of the replicas retiring, sorted (not nil),
// shared until they change.
func (c *replicaCounts) retiringIDs() []string { return c.retiring.Sorted() }

// unplacedIDs are the ids of the replicas on no machine, sorted (not
// nil: a pass reads nil as not known), shared until they change.
func (c *replicaCounts) unplacedIDs() []string { return c.unplaced.Sorted() }

// orphaned are the services some replica names that services does not
// hold, sorted (not nil: a pass reads nil as not known). The list is kept
// until a service comes or goes (servicesChanged) or a service is first
// or no longer named by a replica: not a walk of every service each
// snapshot.
func (c *replicaCounts) orphaned(services map[string]*api.Service) []string {
	if c.orphansKnown {
		return c.orphans
	}
	out := []string{}
	for name := range c.byService {
		if services[name] == nil {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	c.orphans, c.orphansKnown = slices.Clip(out), true
	return c.orphans
}

// servicesChanged notes that a service came or went.
func (c *replicaCounts) servicesChanged() { c.orphansKnown = false }

// pendingByCluster is a copy of the pending counts.
func (c *replicaCounts) pendingByCluster() map[string]int { return maps.Clone(c.pending) }

// MachineStates counts live machines by cluster and state.
type MachineStates struct {
	Cluster    string `json:"cluster"`
	JoinState  string `json:"joinState"`
	FleetState string `json:"fleetState"`
	N          int    `json:"n"`
}

type machineState struct{ cluster, join, fleet string }

// machineCounts count the live machines by cluster and state, kept as
// machines change (the gauges' walk of every machine each pass).
type machineCounts map[machineState]int

// add counts m (n = 1) or stops counting it (n = -1); nil counts nothing.
func (c machineCounts) add(m *api.Machine, n int) {
	if m == nil {
		return
	}
	k := machineState{m.Cluster, string(m.JoinState), string(m.FleetState)}
	if c[k] += n; c[k] == 0 {
		delete(c, k)
	}
}

// list is the counts, by cluster, join state and fleet state.
func (c machineCounts) list() []MachineStates {
	out := make([]MachineStates, 0, len(c))
	for k, n := range c {
		out = append(out, MachineStates{Cluster: k.cluster, JoinState: k.join, FleetState: k.fleet, N: n})
	}
	slices.SortFunc(out, compareStates)
	return out
}

func compareStates(a, b MachineStates) int {
	return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.JoinState, b.JoinState), cmp.Compare(a.FleetState, b.FleetState))
}

// CountMachineStates counts machines by cluster and state, as a
// snapshot's MachineStates do.
func CountMachineStates(machines []*api.Machine) []MachineStates {
	c := machineCounts{}
	for _, m := range machines {
		c.add(m, 1)
	}
	return c.list()
}
