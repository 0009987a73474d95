package planner

import (
	"fmt"
	"slices"

	"github.com/gantry-dev/gantry/api"
)

// fleetWalk is what one walk of the input's machines finds for every
// step of a plan that reads them all: the warm pools' idle machines
// (floorBins), the clusters with a machine not joined yet and the
// groups' counts, free capacity and each machine's group
// (consolidation), and the price of them all (totals). At 10,000
// machines each of those steps walking the machines itself was a cache
// miss per machine each, four times a pass.
type fleetWalk struct {
	// slots is each group's place in the input by its cluster and id
	// (the last of a key's duplicates), and counts what the walk counted
	// of each place.
	slots  map[groupKey]int32
	counts []groupCount
	// eligible are the machines consolidation may weigh, when the plan
	// looks: what it reads of each, read by the walk (a second walk
	// read each machine again, a cache miss each at 10,000 machines).
	eligible []eligible
	// free is each cluster's free capacity on its joined machines, and
	// overcommitted the clusters with a joined machine whose free
	// capacity is below zero.
	free          map[string]api.Resources
	overcommitted map[string]bool
	// busyFree and cheapestEmpty are the what-ifs' (simulation), counted
	// when the plan looks: each cluster's free capacity on its joined
	// machines that hold replicas (below zero counted as none), and the
	// least price of its joined machines that hold none.
	busyFree      map[string]api.Resources
	cheapestEmpty map[string]float64
	// unjoined are the clusters with a machine launched and not joined.
	unjoined map[string]bool
	// costBefore is every machine's price, summed in their order, and
	// prices each one's, side by side (a plan that removes machines sums
	// the others' from them, not by reading every machine again).
	costBefore float64
	prices     []float64
	// memo, when the look took the last look's records (fleetMemo),
	// holds the eligible machines in place of eligible, and memoSlots
	// each of its groups' place in the input.
	memo      *fleetMemo
	memoSlots []int32
}

// groupKey is a group's cluster and id, a map key built without joining
// them (a pass counts every machine's group).
type groupKey struct{ cluster, group string }

// groupCount is what the walk counts of a group, and consolidation as
// it removes machines: its machines, the idle ones, those idle for
// EmptyMachineTTL (settled), the stopped warm ones; bare are the idle
// with nothing allocated either, the warm pool's as floorBins counts it.
// Only the settled fill the warm pool for an empty machine's removal:
// one that joined a moment ago may be the cheaper machine a replacement
// launched, about to take the replicas of the one it replaces; counted
// as the pool's, it let an older idle machine go first, and then the
// move was refused for emptying the pool, and the replacement launched
// again, and again. growing is set by consolidation.
type groupCount struct {
	group                        *Group
	growing                      bool
	live, idle, settled, stopped int
	bare                         int
}

// walkFleet walks the input's machines once. The group of each is found
// by its place in the input, not by a map lookup of the pair of names
// at every count: a group's machines mostly come together (their ids
// begin with its names). A plan that neither consolidates nor fills a
// warm pool reads only the machines' price and the clusters with one not
// joined: when the caller summed those (Input.Sums), it walks nothing.
func (p *planning) walkFleet(plan *Plan) *fleetWalk {
	if sums := p.in.Sums; sums != nil && p.in.SkipConsolidation && !p.noShortcuts && !slices.ContainsFunc(p.in.Groups, func(g *Group) bool { return g.WarmPool > 0 }) {
		return &fleetWalk{costBefore: sums.PricePerHour, unjoined: sums.Unjoined} // all such a plan reads of it
	}
	if p.usesMemo() && p.looksAtAll(plan) {
		w := p.walkFleetMemo()
		if p.cfg.CheckLookRecords {
			if why := walksDiffer(p, w, p.walkEvery(plan)); why != "" {
				panic("planner: a look from the last look's records finds otherwise than a walk of every machine: " + why)
			}
		}
		return w
	}
	return p.walkEvery(plan)
}

// walkEvery is walkFleet's walk of every machine.
func (p *planning) walkEvery(plan *Plan) *fleetWalk {
	w := &fleetWalk{slots: make(map[groupKey]int32, len(p.in.Groups)), counts: make([]groupCount, len(p.in.Groups)),
		free: map[string]api.Resources{}, overcommitted: map[string]bool{}}
	for i, g := range p.in.Groups {
		w.slots[groupKey{g.Cluster, g.ID}] = int32(i)
		w.counts[i] = groupCount{group: g, stopped: g.Stopped}
	}
	scratch := p.in.Scratch.of()
	w.prices = sized(&scratch.prices, len(p.in.Machines))
	weigh := p.weigher(plan)
	w.eligible = scratch.eligible[:0]
	if weigh != nil {
		w.busyFree, w.cheapestEmpty = map[string]api.Resources{}, map[string]float64{}
	}
	last, lastSlot := groupKey{}, int32(-1)
	var lastFree, lastBusyFree api.Resources
	flush := func() {
		if lastFree != (api.Resources{}) {
			w.free[last.cluster] = w.free[last.cluster].Add(lastFree)
		}
		if lastBusyFree != (api.Resources{}) {
			w.busyFree[last.cluster] = w.busyFree[last.cluster].Add(lastBusyFree)
		}
	}
	for i, m := range p.in.Machines {
		if key := (groupKey{m.Cluster, m.Group}); i == 0 || key != last {
			flush()
			slot, ok := w.slots[key]
			if !ok {
				slot = -1
			}
			last, lastSlot, lastFree, lastBusyFree = key, slot, api.Resources{}, api.Resources{}
		}
		if m.Joined {
			f := m.Free()
			lastFree = lastFree.Add(f)
			if f.MilliCPU < 0 || f.MemoryBytes < 0 || f.EphemeralBytes < 0 {
				w.overcommitted[m.Cluster] = true
			}
			if weigh != nil {
				lastBusyFree = w.countBusy(m, f, lastBusyFree)
			}
		} else if !w.unjoined[m.Cluster] {
			if w.unjoined == nil {
				w.unjoined = map[string]bool{}
			}
			w.unjoined[m.Cluster] = true
		}
		w.costBefore += m.PricePerHour // beside Allocated, which Free read
		w.prices[i] = m.PricePerHour
		if lastSlot >= 0 {
			p.count(&w.counts[lastSlot], m)
		}
		if weigh != nil {
			w.eligible = weigh(w.eligible, m, i, lastSlot)
		}
	}
	flush()
	scratch.eligible = w.eligible // grown, for the next look
	return w
}

// countBusy counts a joined machine with free capacity f into the
// what-ifs' busyFree (busy, the run of its group's so far) and
// cheapestEmpty, and returns busy.
func (w *fleetWalk) countBusy(m *Machine, f, busy api.Resources) api.Resources {
	if len(m.Replicas) > 0 { // not its count of services: a look reads every machine, and that count is a map's
		return busy.Add(noneBelowZero(f))
	}
	if least, ok := w.cheapestEmpty[m.Cluster]; !ok || m.PricePerHour < least {
		w.cheapestEmpty[m.Cluster] = m.PricePerHour
	}
	return busy
}

// clusterAtStart is what the walk found of a cluster that a look's
// what-ifs read as they begin.
type clusterAtStart struct {
	free, busyFree api.Resources
	cheapestEmpty  float64
	anyEmpty       bool
}

func (w *fleetWalk) atStart(cluster string) clusterAtStart {
	least, ok := w.cheapestEmpty[cluster]
	return clusterAtStart{free: w.free[cluster], busyFree: w.busyFree[cluster], cheapestEmpty: least, anyEmpty: ok}
}

// gainless says a move of the eligible machine's replicas cannot pay as
// the look begins (noGain). A look that removes at most one machine ends
// at its first removal, so until then every what-if is undone and the
// machines are as they began: such a machine, at its turn, is refused
// its move, and when no cheaper offering holds it (not cheaper), removed
// by none.
func (c clusterAtStart) gainless(e *eligible) bool {
	return e.replicas > 0 && noGain(c.busyFree, c.cheapestEmpty, c.anyEmpty, e.price, e.need.Sub(e.used), e.used)
}

// count counts a machine of the group c counts.
func (p *planning) count(c *groupCount, m *Machine) {
	c.live++
	if len(m.Replicas) > 0 {
		return
	}
	c.idle++
	if p.idleLongEnough(m) {
		c.settled++
	}
	if m.Allocated.MilliCPU == 0 {
		c.bare++
	}
}

// idleLongEnough: empty for at least EmptyMachineTTL.
func (p *planning) idleLongEnough(m *Machine) bool {
	return !m.IdleSince.IsZero() && p.in.Now.Sub(m.IdleSince) >= p.cfg.EmptyMachineTTL
}

// bareIn is how many machines of the group keyed key the walk found with
// nothing on them (of the last of its duplicates' place, where the walk
// counted them all).
func (w *fleetWalk) bareIn(key groupKey) int {
	if slot, ok := w.slots[key]; ok {
		return w.counts[slot].bare
	}
	return 0
}

// ComputeAndLooks is Compute, and whether consolidation would look for
// machines to remove beside the plan: some cluster with a group does not
// grow, by the plan's additions and waiting replicas or by a machine on
// its way (a pass that left consolidation out need not come back for it
// while every cluster grows). It is answered from the walk the plan made
// of the machines, not by another.
func ComputeAndLooks(cfg Config, in Input) (Plan, bool) {
	plan, p := computeKept(cfg, in, false)
	_, looks := consolidationLooks(cfg, in, &plan, p.walk)
	return plan, looks
}

// consolidationLooks is ComputeAndLooks' answer for plan, with the
// growing clusters (every one of them only when it looks); walk, when not
// nil, found the clusters with a machine not joined, and in's machines
// are not read (nil: they are walked, which the tests compare with).
func consolidationLooks(cfg Config, in Input, plan *Plan, walk *fleetWalk) (map[string]bool, bool) {
	if cfg.MaxRemovals <= 0 {
		return nil, false
	}
	growing := growingByPlan(in, plan)
	someStill := func() bool { return someClusterStill(in.Groups, growing) }
	if !someStill() {
		return growing, false // no walk of every machine for a look that cannot be
	}
	// A machine on its way takes replicas once it joins (a replacement
	// launched by an earlier plan, or capacity for pending ones):
	// consolidating before then would launch that replacement again.
	if walk != nil {
		for cluster := range walk.unjoined {
			growing[cluster] = true
		}
		return growing, someStill()
	}
	for _, m := range in.Machines {
		if !m.Joined && !growing[m.Cluster] {
			growing[m.Cluster] = true
			if !someStill() {
				return growing, false
			}
		}
	}
	return growing, true
}

// growingByPlan are the clusters a plan grows: by its additions, or by
// replicas it leaves waiting.
func growingByPlan(in Input, plan *Plan) map[string]bool {
	growing := map[string]bool{}
	for _, nm := range plan.Add {
		growing[nm.Cluster] = true
	}
	if len(plan.Pending) > 0 {
		clusterOf := make(map[string]string, len(in.Pending))
		for _, r := range in.Pending {
			clusterOf[r.ID] = r.Cluster
		}
		for _, pr := range plan.Pending {
			if cluster, ok := clusterOf[pr.Replica]; ok {
				growing[cluster] = true
			}
		}
	}
	return growing
}

// someClusterStill: a group's cluster does not grow. Only a machine of a
// group the plan knows may go, and only in a cluster that does not grow:
// the groups tell whether there can be one, not a look at every
// machine's cluster.
func someClusterStill(groups []*Group, growing map[string]bool) bool {
	return slices.ContainsFunc(groups, func(g *Group) bool { return !growing[g.Cluster] })
}

// floorBins adds the idle machines each group's warm pool is short of
// (openMinSize already brought every group to its minSize).
func (p *planning) floorBins(plan *Plan) {
	idle := map[string]int{}
	for _, g := range p.in.Groups {
		idle[Key(g.Cluster, g.ID)] = p.walk.bareIn(groupKey{g.Cluster, g.ID})
	}
	for _, g := range p.in.Groups {
		idle[Key(g.Cluster, g.ID)] += g.Stopped
	}
	for _, g := range p.in.Groups {
		key := Key(g.Cluster, g.ID)
		for short := g.WarmPool - idle[key]; short > 0 && g.Live+p.added[key] < g.MaxSize; short-- {
			if ok, _ := p.subnetsLeft(g.Cluster); !ok {
				break
			}
			cand := p.catalog.cheapestFor(g)
			if cand == nil {
				break
			}
			p.added[key]++
			plan.Add = append(plan.Add, NewMachine{Key: fmt.Sprintf("new-%d", len(plan.Add)+1), Cluster: g.Cluster, Group: g.ID,
				InstanceType: cand.itype.Name, Zone: cand.offering.Zone, CapacityType: cand.offering.CapacityType,
				PricePerHour: cand.offering.PricePerHour, Reason: fmt.Sprintf("warm pool of %d idle machine(s)", g.WarmPool)})
		}
	}
}

func (p *planning) totals(plan *Plan) {
	switch {
	case len(p.removedAt) == 0 && !p.noShortcuts: // the same sum, in the same order
		plan.CostBefore, plan.CostAfter = p.walk.costBefore, p.walk.costBefore
	default:
		// Machines removed, or no shortcuts: the walk read every machine
		// and listed their prices (walkFleet).
		removed := slices.Sorted(slices.Values(p.removedAt))
		for i, price := range p.walk.prices {
			plan.CostBefore += price
			// The removed by their places: not a read of every machine's id.
			if len(removed) > 0 && removed[0] == int32(i) {
				removed = removed[1:]
				continue
			}
			plan.CostAfter += price
		}
	}
	for _, nm := range plan.Add {
		plan.CostAfter += nm.PricePerHour
		if len(nm.Replicas) > 0 {
			plan.NewCapacityCost += nm.PricePerHour
		}
	}
	for _, g := range p.in.Groups {
		key := Key(g.Cluster, g.ID)
		d := g.Live + p.added[key]
		for _, r := range plan.Remove {
			if Key(r.Cluster, r.Group) == key && r.ReplacedBy == "" && !r.Stop {
				d--
			}
		}
		plan.Desired[key] = min(max(d, g.MinSize), g.MaxSize)
	}
}
