package decide

import (
	"math"
	"slices"
	"strings"

	"github.com/gantry-dev/gantry/api"
)

// splicedCensus is the last pass's census (old) with the machines made
// and deleted since spliced into and out of its places, and those
// changed in place counted again, as sp (sinceLast: the change feed
// names every machine made, changed or deleted) says (nil: a machine is
// not where sp says; count afresh). Only the named machines are
// read: the others keep their places' marks, shifted. At 10,000
// machines, a machine launched or terminated in one steady pass in
// several, and counting every machine afresh then (a cache miss each)
// was a twentieth of the steady hours' passes. The decision harness
// compares it with a count afresh. Its lists are spares.
func splicedCensus(old *fleetCensus, machines []*api.Machine, sp splice, spare *spares) *fleetCensus {
	made, gone, changed := sp.made, sp.gone, sp.changed
	c := old.copyCounts()
	c.machines = len(machines)
	mark := func(m *api.Machine) censusMark {
		numbered, names := c.names.numbered(markOf(m))
		c.names = names
		return numbered
	}
	c.ids, c.marks = takeSpare(&spare.ids, len(machines)), takeSpare(&spare.marks, len(machines))
	j := 0 // the census's place of the next machine kept
	for i := 0; i < len(machines); {
		m := machines[i]
		if len(made) > 0 && made[0] == i {
			made = made[1:]
			mark := mark(m)
			c.tally(mark, 1)
			c.ids, c.marks = append(c.ids, m.ID), append(c.marks, mark)
			i++
			continue
		}
		for len(gone) > 0 && gone[0] == j {
			c.tally(old.marks[j], -1)
			gone, j = gone[1:], j+1
		}
		if j == len(old.ids) {
			return nil
		}
		if len(changed) > 0 && changed[0] == j {
			changed = changed[1:]
			if old.ids[j] != m.ID {
				return nil // not where the feed says: count afresh
			}
			c.tally(old.marks[j], -1)
			mark := mark(m)
			c.tally(mark, 1)
			c.ids, c.marks = append(c.ids, old.ids[j]), append(c.marks, mark)
			i, j = i+1, j+1
			continue
		}
		// Up to the next machine made, gone or changed, the machines are
		// the census's, one for one: their places are copied whole.
		n := min(len(machines)-i, len(old.ids)-j, stepsTo(made, i), stepsTo(gone, j), stepsTo(changed, j))
		c.ids, c.marks = append(c.ids, old.ids[j:j+n]...), append(c.marks, old.marks[j:j+n]...)
		i, j = i+n, j+n
	}
	for _, at := range gone {
		c.tally(old.marks[at], -1)
	}
	c.relist()
	c.sumHeld()
	return c
}

// stepsTo is how far the next place of a sorted list is from at (none
// ahead: as far as can be).
func stepsTo(places []int, at int) int {
	if len(places) > 0 && places[0] >= at {
		return places[0] - at
	}
	return math.MaxInt
}

// splice is how the pass's machines differ from the last census's: the
// places of those made (now), deleted and changed in place (in the
// census), each list sorted.
type splice struct{ made, gone, changed []int }

// spliceOf is how the pass's machines (by id, the sorted ones: the
// pass's own launches aside) differ from the last census's, when the change
// feed names every machine made, changed or deleted since (ok: as far as
// the counts show).
func spliceOf(snap *Snapshot, machines []*api.Machine, sorted int) (splice, bool) {
	b, ch := snap.Booked, snap.Changed
	if b == nil || b.census == nil || b.census.marks == nil || ch == nil || ch.Machines == nil {
		return splice{}, false
	}
	var sp splice
	for _, ids := range []map[string]bool{ch.Machines, b.ownMachines} {
		for id := range ids {
			at, in := slices.BinarySearchFunc(machines[:sorted], id, func(m *api.Machine, id string) int { return strings.Compare(m.ID, id) })
			was, counted := slices.BinarySearch(b.census.ids, id)
			switch {
			case in && counted:
				sp.changed = append(sp.changed, was)
			case in:
				sp.made = append(sp.made, at)
			case counted:
				sp.gone = append(sp.gone, was)
			}
		}
	}
	for _, l := range []*[]int{&sp.made, &sp.gone, &sp.changed} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
	}
	// Otherwise the feed missed a machine made or deleted.
	return sp, len(b.census.ids)-len(sp.gone)+len(sp.made) == sorted
}

// sinceLast is spliceOf for the pass's machines, found once for the
// census and the view's skeleton.
func (p *Pass) sinceLast() (splice, bool) {
	if !p.splice.found {
		p.splice.of, p.splice.ok = spliceOf(p.snap, p.machines, p.sortedMachines)
		p.splice.found = true
	}
	return p.splice.of, p.splice.ok
}

// tally counts (by 1) or takes back (by -1) what a machine counted, in
// its group (made if new; dropped once it has no machine): the counts
// alone (relist lists the places).
func (c *fleetCensus) tally(mark censusMark, by int) {
	key := c.names.groups[mark.group]
	g := c.groups[key]
	if g == nil {
		g = &groupCensus{templates: map[providerTemplate]*int{}}
		c.groups[key] = g
	}
	c.countIn(g, mark, by)
	g.last, g.lastCount = providerTemplate{}, nil
	if g.machines == 0 {
		delete(c.groups, key)
	}
}

// relist lists the places of the machines in a passing state, and the
// provider keys in use, from the marks (in the order a count afresh
// finds them).
func (c *fleetCensus) relist() {
	c.draining, c.launching, c.terminating, c.unreachable, c.replacing, c.keys = nil, nil, nil, nil, nil, nil
	lastKey := int32(-1)
	const passing = markDraining | markTerminating | markLaunching | markUnreachable | markReplacing
	lists := c.passingLists()
	for i, mark := range c.marks {
		if mark.flags&passing != 0 {
			for _, l := range lists {
				if mark.flags&l.flag != 0 {
					*l.list = append(*l.list, i)
				}
			}
		}
		if mark.key != lastKey {
			lastKey = mark.key
			if key := c.names.keys[mark.key]; !slices.Contains(c.keys, key) {
				c.keys = append(c.keys, key)
			}
		}
	}
}
