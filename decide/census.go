package decide

import (
	"slices"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provider/registry"
	"github.com/gantry-dev/gantry/runtime"
)

// fleetCensus is what a pass counts over every machine, in one walk: the
// live ones, each group's, the /24s held, the providers in use, and where
// the few machines in a passing state are. Each of those was a walk of
// its own, a cache miss a machine at 10,000 machines. The booking keeps
// it, and the next pass takes it while no machine changed (a replica
// starting, a describe's answer, a deadline), as the change feed says.
// It holds for the pass's machines until the pass changes one
// (Pass.fleet); after that, each step walks them as before.
type fleetCensus struct {
	// machines is how many it counted, the snapshot's.
	machines int
	live     int
	groups   map[groupKey]*groupCensus
	// held: by cluster, the live machines holding a /24 (or to hold one:
	// the pass's launches).
	held map[string]int
	// keys are the machines' provider keys, each once.
	keys []string
	// draining, launching, terminating and unreachable are positions in
	// the pass's machines (by id), in order.
	draining, launching, terminating, unreachable []int
}

type groupKey struct{ cluster, group string }

// groupCensus counts a capacity group's machines.
type groupCensus struct {
	// counted count toward the group's size; stopped are in its warm
	// pool; inUse are live and neither terminating nor draining; held are
	// live and hold a /24.
	counted, stopped, inUse, held int
	// tee: a joined machine offers a TEE runtime.
	tee bool
	// templates counts the machines counted toward the group by
	// provider and template.
	templates map[providerTemplate]*int
	// last is the provider and template counted last, and its count:
	// a group's machines mostly share them, so the walk hashes them
	// when they change, not for each machine.
	last      providerTemplate
	lastCount *int
}

type providerTemplate struct{ provider, template string }

// countFleet takes the census of machines: the pass's, by id, then those
// it launched.
func countFleet(machines []*api.Machine) *fleetCensus {
	c := &fleetCensus{machines: len(machines), groups: map[groupKey]*groupCensus{}, held: map[string]int{}}
	var g *groupCensus
	var last groupKey
	lastKey := ""
	for i, m := range machines {
		// Machines of a group mostly follow each other: its entry is
		// looked up when the group changes, not for each machine.
		if g == nil || m.Cluster != last.cluster || m.Group != last.group {
			last = groupKey{m.Cluster, m.Group}
			if g = c.groups[last]; g == nil {
				g = &groupCensus{templates: map[providerTemplate]*int{}}
				c.groups[last] = g
			}
		}
		c.count(g, i, m)
		if key := registry.KeyOf(m); key != lastKey {
			lastKey = key
			if !slices.Contains(c.keys, key) {
				c.keys = append(c.keys, key)
			}
		}
	}
	for k, g := range c.groups {
		if g.held > 0 {
			c.held[k.cluster] += g.held
		}
		g.last, g.lastCount = providerTemplate{}, nil // the count's, not the census's
	}
	return c
}

func (c *fleetCensus) count(g *groupCensus, i int, m *api.Machine) {
	live := m.Live()
	if live {
		c.live++
		if m.Subnet != "" || isPlaceholder(m) { // the pass's own launches take one each
			g.held++
		}
	}
	if m.CountsTowardGroup() {
		g.counted++
		g.countTemplate(providerTemplate{m.Provider, m.TemplateHash})
	}
	switch m.FleetState {
	case api.FleetStopped:
		g.stopped++
	case api.FleetDraining:
		c.draining = append(c.draining, i)
	case api.FleetTerminating:
		c.terminating = append(c.terminating, i)
	}
	if live && m.FleetState != api.FleetTerminating && m.FleetState != api.FleetDraining {
		g.inUse++
	}
	if m.Launching() {
		c.launching = append(c.launching, i)
	}
	if m.UnreachableSince != nil {
		c.unreachable = append(c.unreachable, i)
	}
	if !g.tee && m.JoinState == api.JoinJoined && slices.ContainsFunc(m.Runtimes, runtime.IsTEE) {
		g.tee = true
	}
}

func (g *groupCensus) countTemplate(pt providerTemplate) {
	if g.lastCount == nil || pt != g.last {
		n, ok := g.templates[pt]
		if !ok {
			n = new(int)
			g.templates[pt] = n
		}
		g.last, g.lastCount = pt, n
	}
	*g.lastCount++
}

// keptCensus is the last pass's census when it holds for snap: the change
// feed is known and names no machine made, changed or deleted since the
// last pass, which changed none itself (its act may not have written
// what it did). Heartbeats do not count: the census reads none.
func keptCensus(snap *Snapshot) *fleetCensus {
	b, ch := snap.Booked, snap.Changed
	if b == nil || b.census == nil || ch == nil || ch.Machines == nil || len(ch.Machines) > 0 || len(b.ownMachines) > 0 ||
		b.census.machines != len(snap.Machines) {
		return nil
	}
	return b.census
}

// fleet is the census of the pass's machines, nil once the pass changed
// or launched one.
func (p *Pass) fleet() *fleetCensus {
	if len(p.mineMachines) > 0 {
		return nil
	}
	return p.census
}

// countedNow is the census of the pass's machines as they are now: a
// count afresh once the pass changed or launched one.
func (p *Pass) countedNow() *fleetCensus {
	if c := p.fleet(); c != nil {
		return c
	}
	return countFleet(p.machines)
}

// machinesIn are the pass's machines a step needs to look at: those at
// the census's positions while it holds (the step still checks each), else
// all of them.
func (p *Pass) machinesIn(positions func(*fleetCensus) []int) []*api.Machine {
	c := p.fleet()
	if c == nil {
		return p.machines
	}
	at := positions(c)
	out := make([]*api.Machine, len(at))
	for i, pos := range at {
		out[i] = p.machines[pos]
	}
	return out
}

// rollout is a group's tally from the census, when no machine counted
// toward it runs another template than current (else false: the tally
// needs the machines).
func (c *fleetCensus) rollout(cluster, group, current string, provisions func(string) bool) (groupRollout, bool) {
	var gr groupRollout
	g := c.groups[groupKey{cluster, group}]
	if g == nil {
		return gr, true
	}
	for pt, n := range g.templates {
		if !provisions(pt.provider) {
			continue
		}
		if pt.template != current {
			return gr, false
		}
		gr.live += *n
	}
	return gr, true
}

// orphaned reports whether a machine in use belongs to a group the spec
// no longer has.
func (c *fleetCensus) orphaned(exists map[string]bool, key func(cluster, group string) string) bool {
	for k, g := range c.groups {
		if g.inUse > 0 && !exists[key(k.cluster, k.group)] {
			return true
		}
	}
	return false
}
