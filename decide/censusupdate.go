package decide

import (
	"slices"
	"strings"

	"github.com/gantry-dev/gantry/api"
)

// updatedCensus is the last pass's census with what changed since
// counted again, when the change feed names every machine that changed
// and none was made or deleted: each changed machine takes back what it
// counted and counts anew, in its group, at its place (nil: count
// afresh). At 10,000 machines, four in five passes that could not keep
// the census saw only machines change in place (a launch answered, an
// agent joined), and counting all of them was a twentieth of such a
// pass. The decision harness compares it with a count afresh.
func updatedCensus(snap *Snapshot, machines []*api.Machine, sorted int) *fleetCensus {
	changed, ok := changedPlaces(snap, machines, sorted)
	if !ok {
		return nil
	}
	prev := snap.Booked.census
	marks := make([]censusMark, len(changed))
	names := prev.names
	for k, i := range changed {
		if marks[k], names = names.numbered(markOf(machines[i])); marks[k].key != prev.marks[i].key || marks[k].group != prev.marks[i].group {
			return nil // its provider or group changed: their order and entries are the count's
		}
	}
	// The marks are taken over: the last pass's booking, and its census,
	// are this pass's to consume.
	c := prev.copyCounts()
	c.names = names
	for k, i := range changed {
		c.countAt(i, prev.marks[i], -1)
		c.countAt(i, marks[k], 1)
		c.marks[i] = marks[k]
	}
	c.sumHeld()
	return c
}

// changedPlaces are the places among machines (the pass's, by id) of the
// machines changed since the last pass, sorted: those the feed names and
// those the last pass changed itself. ok is false when they cannot be
// known from the last pass's census: the feed does not name the machines,
// or one was made or deleted since (the places moved).
func changedPlaces(snap *Snapshot, machines []*api.Machine, sorted int) ([]int, bool) {
	b, ch := snap.Booked, snap.Changed
	if b == nil || b.census == nil || b.census.marks == nil || ch == nil || ch.Machines == nil ||
		b.census.machines != len(snap.Machines) || sorted != len(snap.Machines) {
		return nil, false
	}
	var changed []int
	for _, ids := range []map[string]bool{ch.Machines, b.ownMachines} {
		for id := range ids {
			i, ok := findByID(machines, sorted, id, apiMachineID)
			if !ok || b.census.ids[i] != id {
				return nil, false
			}
			changed = append(changed, i)
		}
	}
	slices.Sort(changed)
	return slices.Compact(changed), true
}

// countAt counts (by 1) or takes back (by -1) what machine i counted, in
// its group (made if new), one machine at a time.
func (c *fleetCensus) countAt(i int, mark censusMark, by int) {
	key := c.names.groups[mark.group]
	g := c.groups[key]
	if g == nil {
		g = &groupCensus{templates: map[providerTemplate]*int{}}
		c.groups[key] = g
	}
	c.count(g, i, mark, by)
	g.last, g.lastCount = providerTemplate{}, nil
}

// copyCounts is a census with c's counts, lists and groups of its own,
// and c's ids and marks.
func (c *fleetCensus) copyCounts() *fleetCensus {
	out := &fleetCensus{machines: c.machines, live: c.live, groups: make(map[groupKey]*groupCensus, len(c.groups)), held: map[string]int{},
		keys: slices.Clone(c.keys), draining: slices.Clone(c.draining), launching: slices.Clone(c.launching),
		terminating: slices.Clone(c.terminating), unreachable: slices.Clone(c.unreachable), replacing: slices.Clone(c.replacing), ids: c.ids, marks: c.marks, names: c.names}
	for k, g := range c.groups {
		cg := *g
		cg.templates = make(map[providerTemplate]*int, len(g.templates))
		for pt, n := range g.templates {
			v := *n
			cg.templates[pt] = &v
		}
		out.groups[k] = &cg
	}
	return out
}

// withMachines is the census of the pass's machines once it changed or
// launched some (mine): the snapshot's census, each changed machine
// counted again and each launch (after the sorted ones) counted, rather
// than a count of every machine (nil: count afresh, as when a changed
// machine's provider or group differs). It keeps no marks: no pass takes
// it over.
func (c *fleetCensus) withMachines(machines []*api.Machine, sorted int, mine map[*api.Machine]bool) *fleetCensus {
	if c.marks == nil || c.machines != sorted {
		return nil
	}
	type recount struct {
		i    int
		mark censusMark
	}
	var changed []recount
	names := c.names
	number := func(m *api.Machine) censusMark {
		var mark censusMark
		mark, names = names.numbered(markOf(m))
		return mark
	}
	for m := range mine {
		if isPlaceholder(m) {
			continue // a launch: counted below, in the order of the launches
		}
		i, ok := slices.BinarySearchFunc(machines[:sorted], m.ID, func(x *api.Machine, id string) int { return strings.Compare(x.ID, id) })
		if !ok {
			return nil
		}
		mark := number(m)
		if mark.key != c.marks[i].key || mark.group != c.marks[i].group {
			return nil
		}
		changed = append(changed, recount{i, mark})
	}
	slices.SortFunc(changed, func(a, b recount) int { return a.i - b.i })
	for i := sorted; i < len(machines); i++ { // the pass's launches, each its own
		changed = append(changed, recount{i, number(machines[i])})
	}
	out := c.copyCounts()
	out.ids, out.marks, out.machines, out.names = nil, nil, len(machines), names
	for _, r := range changed {
		if r.i < sorted {
			out.countAt(r.i, c.marks[r.i], -1)
		} else if key := names.keys[r.mark.key]; !slices.Contains(out.keys, key) {
			out.keys = append(out.keys, key)
		}
		out.countAt(r.i, r.mark, 1)
	}
	out.sumHeld()
	return out
}
