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
	// the pass's machines (by id), in order; replacing, of the machines
	// that replace another (Machine.Replaces).
	draining, launching, terminating, unreachable, replacing []int
	// ids and marks are each machine's id and what it counted, by
	// position: the next pass takes back what a changed machine counted
	// and counts it again (censusupdate.go).
	ids   []string
	marks []censusMark
	// names are what the marks name, by number.
	names *censusNames
}

type groupKey struct{ cluster, group string }

// groupCensus counts a capacity group's machines.
type groupCensus struct {
	// counted count toward the group's size; stopped are in its warm
	// pool; inUse are live and neither terminating nor draining; held are
	// live and hold a /24.
	counted, stopped, inUse, held int
	// machines counts its machines, whatever their state: a group none
	// is left in is no longer listed (as a count afresh would not).
	machines int
	// tee: a joined machine offers a TEE runtime (teeJoined of them).
	tee       bool
	teeJoined int
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
	c := &fleetCensus{machines: len(machines), groups: map[groupKey]*groupCensus{}, held: map[string]int{},
		ids: make([]string, len(machines)), marks: make([]censusMark, len(machines))}
	var g *groupCensus
	var lastGroup groupKey
	var last lastMark
	lastKey := ""
	for i, m := range machines {
		// Machines of a group mostly follow each other: its entry is
		// looked up when the group changes, not for each machine.
		if g == nil || m.Cluster != lastGroup.cluster || m.Group != lastGroup.group {
			lastGroup = groupKey{m.Cluster, m.Group}
			if g = c.groups[lastGroup]; g == nil {
				g = &groupCensus{templates: map[providerTemplate]*int{}}
				c.groups[lastGroup] = g
			}
		}
		named := markOf(m)
		mark, ok := last.again(named)
		if !ok {
			mark, c.names = c.names.numbered(named)
			last = lastMark{named, mark, true}
		}
		c.ids[i], c.marks[i] = m.ID, mark
		c.count(g, i, mark, 1)
		if named.key != lastKey {
			lastKey = named.key
			if !slices.Contains(c.keys, named.key) {
				c.keys = append(c.keys, named.key)
			}
		}
	}
	c.sumHeld()
	for _, g := range c.groups {
		g.last, g.lastCount = providerTemplate{}, nil // the count's, not the census's
	}
	return c
}

// sumHeld counts each cluster's /24s held from its groups'.
func (c *fleetCensus) sumHeld() {
	for k, g := range c.groups {
		if g.held > 0 {
			c.held[k.cluster] += g.held
		}
	}
}

type censusFlags uint16

const (
	markLive censusFlags = 1 << iota
	markHeld
	markCounted
	markStopped
	markInUse
	markTEE
	markDraining
	markTerminating
	markLaunching
	markUnreachable
	markReplacing
)

// markOf is what the census counts of m.
func markOf(m *api.Machine) namedMark {
	mark := namedMark{group: groupKey{m.Cluster, m.Group}, key: registry.KeyOf(m)}
	set := func(f censusFlags, on bool) {
		if on {
			mark.flags |= f
		}
	}
	live := m.Live()
	set(markLive, live)
	set(markHeld, live && (m.Subnet != "" || isPlaceholder(m))) // the pass's own launches take one each
	if m.CountsTowardGroup() {
		mark.flags |= markCounted
		mark.template = providerTemplate{m.Provider, m.TemplateHash}
	}
	set(markStopped, m.FleetState == api.FleetStopped)
	set(markDraining, m.FleetState == api.FleetDraining)
	set(markTerminating, m.FleetState == api.FleetTerminating)
	set(markInUse, live && m.FleetState != api.FleetTerminating && m.FleetState != api.FleetDraining)
	set(markLaunching, m.Launching())
	set(markUnreachable, m.UnreachableSince != nil)
	set(markReplacing, m.Replaces != "")
	set(markTEE, m.JoinState == api.JoinJoined && slices.ContainsFunc(m.Runtimes, runtime.IsTEE))
	return mark
}

// count adds what machine i counted (by 1), or takes it back (by -1),
// in its group g.
func (c *fleetCensus) count(g *groupCensus, i int, mark censusMark, by int) {
	c.countIn(g, mark, by)
	for _, l := range c.passingLists() {
		if mark.flags&l.flag != 0 {
			*l.list = listed(*l.list, i, by > 0)
		}
	}
}

// passingList is the census's list of the places of machines in a
// passing state, and the mark's flag of that state.
type passingList struct {
	list *[]int
	flag censusFlags
}

// passingLists are the census's lists of places by passing state.
func (c *fleetCensus) passingLists() [5]passingList {
	return [5]passingList{{&c.draining, markDraining}, {&c.terminating, markTerminating}, {&c.launching, markLaunching}, {&c.unreachable, markUnreachable},
		{&c.replacing, markReplacing}}
}

// countIn counts what a machine counted (by 1), or takes it back (by
// -1), in the fleet's and its group g's counts: all but the lists of
// places.
func (c *fleetCensus) countIn(g *groupCensus, mark censusMark, by int) {
	has := func(f censusFlags) bool { return mark.flags&f != 0 }
	add := func(n *int, f censusFlags) {
		if has(f) {
			*n += by
		}
	}
	g.machines += by
	add(&c.live, markLive)
	add(&g.held, markHeld)
	add(&g.counted, markCounted)
	add(&g.stopped, markStopped)
	add(&g.inUse, markInUse)
	add(&g.teeJoined, markTEE)
	g.tee = g.teeJoined > 0
	if has(markCounted) {
		g.countTemplate(c.names.templates[mark.template], by)
	}
}

// listed is positions with i in it (or not): appended in a count, which
// goes in order, else put in its place.
func listed(positions []int, i int, in bool) []int {
	at, found := slices.BinarySearch(positions, i)
	switch {
	case in && !found:
		return slices.Insert(positions, at, i)
	case !in && found && len(positions) == 1:
		return nil // as a count without it has it
	case !in && found:
		return slices.Delete(positions, at, at+1)
	}
	return positions
}

func (g *groupCensus) countTemplate(pt providerTemplate, by int) {
	if g.lastCount == nil || pt != g.last {
		n, ok := g.templates[pt]
		if !ok {
			n = new(int)
			g.templates[pt] = n
		}
		g.last, g.lastCount = pt, n
	}
	*g.lastCount += by
	if *g.lastCount == 0 { // counted afresh, no machine of it would have an entry
		delete(g.templates, pt)
		g.last, g.lastCount = providerTemplate{}, nil
	}
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
	if c := p.counts(); c != nil {
		return c
	}
	return countFleet(p.machines)
}

// counts is the census of the pass's machines as they are now, for
// their counts alone (nil: the machines must be walked): the census
// while it holds, else the census with the machines the pass changed or
// launched counted again (a step that walked every machine once the pass
// had changed one walked 10,000 in most passes that acted).
func (p *Pass) counts() *fleetCensus {
	if c := p.fleet(); c != nil {
		return c
	}
	return p.census.withMachines(p.machines, p.sortedMachines, p.mineMachines)
}

// machinesIn are the pass's machines a step needs to look at: those at
// the census's positions (the step still checks each), the census with
// the machines the pass changed or launched counted again once it did,
// else all of them. A pass that drained or launched a machine walked
// 10,000 machines to follow terminations, and the night's passes that
// remove one machine after another (max-removals) each did.
func (p *Pass) machinesIn(positions func(*fleetCensus) []int) []*api.Machine {
	c := p.counts()
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

// drainingCandidates are the machines that may be draining: the
// census's draining ones while it holds, else every machine (each
// caller checks the state).
func (p *Pass) drainingCandidates() []*api.Machine {
	return p.machinesIn(func(c *fleetCensus) []int { return c.draining })
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
