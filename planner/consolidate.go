package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/scheduler"
)

// consolidate finds machines to remove: empty ones idle past
// EmptyMachineTTL, and ones whose replicas all fit on the other machines —
// or on one cheaper machine saving at least SavingsFloor — never younger
// than MinLifetime, never below minSize or into the warm pool, at most
// MaxRemovals, and never in a cluster the plan is growing or with a
// machine on its way.
func (p *planning) consolidate(plan *Plan) []Removal {
	growing, looks := consolidationLooks(p.cfg, p.in, plan, p.walk)
	if !looks {
		return nil // no sort of every machine to remove none
	}
	counts, free := p.walk.counts, p.walk.free
	for i := range counts {
		counts[i].growing = growing[counts[i].group.Cluster]
	}
	var removals []Removal
	var sim *simulation // made for the first machine that may go: a growing cluster needs none
	candidates := p.candidates(p.walk, p.mayGo(counts, p.walk))
	for _, c := range candidates {
		if len(removals) >= p.cfg.MaxRemovals {
			break
		}
		if c.slot < 0 {
			continue // a machine of no group the plan knows
		}
		m, gc := c.m, &counts[c.slot]
		g := gc.group
		if gc.growing || gc.live <= g.MinSize {
			continue
		}
		if sim == nil {
			sim = newSimulation(p.in.Machines, p.in.Scratch.of(), free, func() func(int, *Machine) bool { return p.mayReceive(candidates) })
			sim.noShortcuts, sim.inputByID = p.noShortcuts, p.in.MachinesByID
			sim.busyFree, sim.cheapestEmpty = p.walk.busyFree, p.walk.cheapestEmpty
		}
		held := sim.replicasOn(m)
		if len(held) == 0 {
			toStop := g.WarmStopped && gc.stopped < g.WarmPool
			if p.idleLongEnough(m) && (toStop || gc.settled+gc.stopped > g.WarmPool) {
				r := Removal{MachineID: m.ID, Cluster: m.Cluster, Group: m.Group, PricePerHour: m.PricePerHour,
					Reason: fmt.Sprintf("empty for more than %s", p.cfg.EmptyMachineTTL)}
				if toStop {
					r.Stop, r.Reason = true, r.Reason+": stopped into the warm pool"
					gc.stopped++
				} else {
					gc.live--
				}
				removals, p.removedAt = append(removals, r), append(p.removedAt, c.at)
				gc.idle, gc.settled = gc.idle-1, gc.settled-1
				sim.remove(m)
			}
			continue
		}
		if sim.moveAway(m, g.WarmPool) {
			removals, p.removedAt = append(removals, Removal{MachineID: m.ID, Cluster: m.Cluster, Group: m.Group, PricePerHour: m.PricePerHour,
				Reason: fmt.Sprintf("its %d replica(s) fit on other machines", len(held))}), append(p.removedAt, c.at)
			gc.live--
			continue
		}
		if r, ok := p.replacement(sim.machine(m), sim.replicasOn(m), g, plan); ok {
			sim.remove(m)
			removals, p.removedAt = append(removals, r), append(p.removedAt, c.at)
		}
	}
	if sim != nil {
		p.outOfWhatIfs, p.whatIfsOutside = p.outOfWhatIfs+sim.leftOut, p.whatIfsOutside+sim.outside
		p.gainless, p.cutShort = p.gainless+sim.gainless, p.cutShort+sim.cutShort
	}
	return removals
}

// mayGo says whether consolidation could remove a machine at all, from
// what holds before it removes any: a removal only makes the next
// harder. The cluster's free capacity only shrinks, a machine only
// gains the replicas moved onto it (so it fits fewer offerings), and a
// group only loses machines. So a machine that fails every test now
// would fail it in the walk too, and is left out before the candidates
// are sorted (at 10,000 machines the sort of all of them was most of a
// consolidation that found nothing). Kept as they are: every machine of a
// cluster with one overcommitted (free capacity below zero), whose
// replacement gives the cluster back the room it overdrew; and machines
// with GPUs, as a GPU type moved on may change the offerings that hold
// the rest. Elsewhere an empty machine always passes: there is room for
// nothing. A look that removes one machine at most also leaves out the
// machines whose move cannot pay (clusterAtStart.gainless). What it reads of
// each machine, the walk of every machine read (eligible).
func (p *planning) mayGo(counts []groupCount, walk *fleetWalk) func(*eligible) bool {
	overcommitted := walk.overcommitted
	var cluster string
	var at clusterAtStart
	return func(e *eligible) bool {
		if e.slot < 0 {
			return false
		}
		gc := &counts[e.slot]
		switch {
		case gc.growing || gc.live <= gc.group.MinSize:
			return false
		case e.gpus || len(overcommitted) > 0 && overcommitted[e.cluster]:
			return true
		}
		if e.cluster != cluster { // a cluster's machines come together
			cluster, at = e.cluster, walk.atStart(e.cluster)
		}
		// The walk's own two tests, on the machines as they are now.
		if !at.free.Fits(e.need) { // roomBeside
			return e.cheaper // cheaperThan
		}
		if !e.cheaper && p.cfg.MaxRemovals == 1 && at.gainless(e) {
			p.gainlessAtStart++
			return false
		}
		return true
	}
}

// eligible is a machine consolidation may weigh (joined, not kept from
// disruption, empty or old enough), as the walk of every machine read
// it: its place and its group's, its sort keys, and what mayGo asks of
// it. need is the room beside it the cluster must have (roomNeeded),
// used what it holds (on the allocation's three resources); cheaper: a
// cheaper offering of its group holds it (cheaperThan), known for a
// machine of a group without GPUs.
type eligible struct {
	keyed
	cluster    string
	need, used api.Resources
	gpus       bool
	cheaper    bool
}

// weigher adds a machine the walk reads to the eligible ones, when
// consolidation may weigh it (nil: the plan does not consolidate, or
// grows every cluster, so that it cannot look).
func (p *planning) weigher(plan *Plan) func([]eligible, *Machine, int, int32) []eligible {
	if !p.looksAtAll(plan) {
		return nil
	}
	var last holding
	madeBy := p.in.Now.Add(-p.cfg.MinLifetime) // made after it: younger than MinLifetime (a comparison, not a Sub checked for overflow, each machine)
	return func(out []eligible, m *Machine, i int, slot int32) []eligible {
		if !m.Joined || m.DoNotDisrupt || len(m.Replicas) > 0 && m.CreatedAt.After(madeBy) {
			return out
		}
		e := eligible{keyed: keyed{removable{m, slot, int32(i)}, len(m.Replicas), m.PricePerHour, m.ID}, cluster: m.Cluster,
			used: usedOf(m.Machine), gpus: len(m.GPUs) > 0}
		e.need = m.Free().Add(e.used) // roomNeeded
		if slot >= 0 && !e.gpus && !p.noShortcuts {
			e.cheaper = p.cheaperThan(last.of(p.catalog, m.Machine, p.in.Groups[slot]), m.Machine) != nil
		}
		return append(out, e)
	}
}

// looksAtAll: the plan consolidates, and some cluster does not grow.
func (p *planning) looksAtAll(plan *Plan) bool {
	return !p.in.SkipConsolidation && p.cfg.MaxRemovals > 0 && someClusterStill(p.in.Groups, growingByPlan(p.in, plan))
}

// holding is the last answer of cheapestHolding for a machine without
// GPUs: the machines of a group mostly hold a few shapes, one after
// another, and the walk of the group's offerings was most of mayGo.
type holding struct {
	group *Group
	zone  string
	used  api.Resources
	cand  *candidate
	known bool
}

// of is the cheapest offering of g holding m, the last answer when m is
// of the last machine's group, zone and allocation.
func (h *holding) of(idx *offeringIndex, m *scheduler.Machine, g *Group) *candidate {
	if h.known && h.group == g && h.zone == m.Zone && h.used == m.Allocated {
		return h.cand
	}
	h.group, h.zone, h.used, h.known = g, m.Zone, m.Allocated, true
	h.cand = idx.cheapestHolding(&bin{m: m, group: g, offering: offeringOf(m)})
	return h.cand
}

// removable is a machine consolidation may remove, with its group's
// place in the counts.
type removable struct {
	m        *Machine
	slot, at int32 // at: its place in the input
}

// candidates: the eligible machines (joined, and empty — bound by
// EmptyMachineTTL — or old enough to consolidate: MinLifetime) that
// mayGo lets in, fewest replicas first, then the most expensive, then by
// id.
func (p *planning) candidates(walk *fleetWalk, mayGo func(*eligible) bool) []removable {
	scratch := p.in.Scratch.of()
	keys := scratch.keys[:0]
	byID := true // the input comes by id, as a pass hands it (and says so)
	keep := func(e *eligible) {
		if !p.noShortcuts && !mayGo(e) {
			p.leftOut++
			return
		}
		if n := len(keys); !p.in.MachinesByID && n > 0 && keys[n-1].id >= e.id {
			byID = false
		}
		keys = append(keys, e.keyed)
	}
	if walk.memo != nil {
		walk.eachEligibleInMemo(p, keep)
	} else {
		for k := range walk.eligible {
			keep(&walk.eligible[k])
		}
	}
	scratch.keys = keys // grown, for the next look
	if byID {
		keys = byReplicasThenPrice(keys, &scratch.byKey)
	} else {
		slices.SortFunc(keys, byEveryKey)
	}
	out := sized(&scratch.candidates, len(keys))
	for i, k := range keys {
		out[i] = k.removable
	}
	return out
}

// keyed is a candidate with its sort keys, read once each and side by
// side: a comparison that read them through each machine (and its
// scheduler's) missed the cache at 10,000 machines.
type keyed struct {
	removable
	replicas int
	price    float64
	id       string
}

// byEveryKey is the candidates' order: fewest replicas first, then the
// dearest, then by id.
func byEveryKey(a, b keyed) int {
	return cmp.Or(cmp.Compare(a.replicas, b.replicas), cmp.Compare(b.price, a.price), strings.Compare(a.id, b.id))
}

// byReplicasThenPrice orders candidates that come by id by their
// replicas, fewest first, then by price, dearest first, keeping the
// order by id among equals: the candidates' order, without comparing ids
// (counted by replicas, then each count's few prices sorted stably). A
// sort of every candidate each consolidation was a twentieth of a day of
// 10,000 machines. The order is written into *buf, grown when short.
func byReplicasThenPrice(keys []keyed, buf *[]keyed) []keyed {
	most := 0
	for _, k := range keys {
		most = max(most, k.replicas)
	}
	starts := make([]int, most+2)
	for _, k := range keys {
		starts[k.replicas+1]++
	}
	for n := 1; n < len(starts); n++ {
		starts[n] += starts[n-1]
	}
	out := sized(buf, len(keys)) // each place written below
	next := slices.Clone(starts[:most+1])
	for _, k := range keys {
		out[next[k.replicas]] = k
		next[k.replicas]++
	}
	dearestFirst := func(a, b keyed) int { return cmp.Compare(b.price, a.price) }
	for n := 0; n <= most; n++ {
		if same := out[starts[n]:starts[n+1]]; !slices.IsSortedFunc(same, dearestFirst) {
			slices.SortStableFunc(same, dearestFirst)
		}
	}
	return out
}

// replacement swaps a machine for the cheapest offering of its group and
// zone that holds its replicas, when that saves at least SavingsFloor.
func (p *planning) replacement(m *scheduler.Machine, replicas []scheduler.Replica, g *Group, plan *Plan) (Removal, bool) {
	cand := p.cheaperHolding(m, g)
	if cand == nil {
		return Removal{}, false
	}
	key := fmt.Sprintf("new-%d", len(plan.Add)+1)
	var ids []string
	for _, r := range replicas {
		ids = append(ids, r.ID)
	}
	plan.Add = append(plan.Add, NewMachine{Key: key, Cluster: g.Cluster, Group: g.ID, InstanceType: cand.itype.Name,
		Zone: cand.offering.Zone, CapacityType: cand.offering.CapacityType, PricePerHour: cand.offering.PricePerHour,
		Reason: fmt.Sprintf("replaces %s for $%.4f/h instead of $%.4f/h", m.ID, cand.offering.PricePerHour, m.PricePerHour), Replicas: ids})
	return Removal{MachineID: m.ID, Cluster: m.Cluster, Group: m.Group, PricePerHour: m.PricePerHour, ReplacedBy: key,
		Reason: fmt.Sprintf("a cheaper machine (%s) holds its replicas", cand.itype.Name)}, true
}

// cheaperHolding is the cheapest offering of the machine's group and zone
// that holds what it runs, when that saves at least SavingsFloor (nil:
// none does).
func (p *planning) cheaperHolding(m *scheduler.Machine, g *Group) *candidate {
	return p.cheaperThan(p.catalog.cheapestHolding(&bin{m: m, group: g, offering: offeringOf(m)}), m)
}

// cheaperThan is cand when it is cheaper than m and saves at least
// SavingsFloor on it (nil: it does not, or there is none). Under a floor
// of zero the cheapest offering may be m's own, at m's price.
func (p *planning) cheaperThan(cand *candidate, m *scheduler.Machine) *candidate {
	if cand == nil || cand.offering.PricePerHour >= m.PricePerHour || cand.offering.PricePerHour > (1-p.cfg.SavingsFloor)*m.PricePerHour {
		return nil
	}
	return cand
}

// roomBeside says whether a cluster's free capacity, but for the
// machine's own, could hold the machine's replicas: the quick "cannot
// possibly fit" check before a what-if moves them.
func roomBeside(clusterFree api.Resources, m *scheduler.Machine) bool {
	return clusterFree.Fits(roomNeeded(m))
}

// roomNeeded is the cluster's free capacity roomBeside asks for beside
// m: its own free capacity and what it holds (on the allocation's three
// resources), as clusterFree − free fits used when clusterFree fits
// free + used.
func roomNeeded(m *scheduler.Machine) api.Resources {
	return m.Free().Add(usedOf(m))
}

// usedOf is what m holds on the allocation's three resources.
func usedOf(m *scheduler.Machine) api.Resources {
	used := m.Allocated
	return api.Resources{MilliCPU: used.MilliCPU, MemoryBytes: used.MemoryBytes, EphemeralBytes: used.EphemeralBytes}
}

func offeringOf(m *scheduler.Machine) provisioner.Offering {
	return provisioner.Offering{Zone: m.Zone, CapacityType: m.CapacityType, PricePerHour: m.PricePerHour}
}

// simulation is the joined machines as consolidation rearranges them.
// It is built at the first what-if that needs it: until then it is the
// input as it is, and only the clusters' free capacity is counted (most
// passes' candidates fail the quick "cannot possibly fit" check, and
// copying every machine into a scheduling session cost more than all
// their what-ifs).
type simulation struct {
	in    []*Machine
	built bool
	// scratch holds the what-ifs' lists and copies, overwritten whole
	// when built.
	scratch *Scratch
	// receivers says, once built, which machines a what-if may move a
	// replica onto: the others stay out of its session (nil: all of
	// them).
	receivers func() func(int, *Machine) bool
	leftOut   int
	// free is each cluster's unallocated capacity, for a quick "cannot
	// possibly fit" check before a full simulation.
	free map[string]api.Resources

	// machines are the what-ifs' copies, in the input's order, and
	// replicas what each holds now, moves included (by the same place).
	// A machine is found by its id in ids, searched when they are sorted
	// (the input by id, as a pass hands it), else through byID, made on
	// first use: a map of every machine was most of a what-if's cost.
	machines []*scheduler.Machine
	ids      []string
	sorted   bool
	// inputByID: the input's promise that its machines come by id
	// (Input.MachinesByID), so the ids need no compare to be sorted.
	inputByID bool
	byID      map[string]int
	replicas  [][]scheduler.Replica
	// session places what-if moves; removed machines are excluded from it.
	session *scheduler.Session
	// last is the machine placeOf last found, and its place.
	last struct {
		m  *Machine
		at int
		in bool
	}
	// idle counts empty machines per cluster/group (removed ones not).
	idleIn map[string]int
	// busyFree bounds from above each cluster's free capacity on its
	// machines that hold replicas (each one's free as the what-ifs began,
	// below zero counted as none, and all of an empty machine's once a
	// move fills it), and cheapestEmpty is the least price of a machine
	// empty when they began (empty machines only get fewer): a move that
	// does not fit busyFree fills an empty machine, and saves nothing when
	// none is cheaper (noGain). The walk counted both (the what-ifs take
	// them over).
	busyFree      map[string]api.Resources
	cheapestEmpty map[string]float64
	// outside counts the what-ifs of machines out of the session (tests).
	outside int
	// noShortcuts makes every what-if (tests: noGain is held to them);
	// gainless counts the what-ifs noGain spared, cutShort those placeAll
	// ended early.
	noShortcuts bool
	gainless    int
	cutShort    int
}

// newSimulation is the machines as they are; free is each cluster's free
// capacity on its joined machines, which the simulation takes over, and
// receivers says, when it is built, which machines its what-ifs may move
// replicas onto (nil: all).
func newSimulation(ms []*Machine, scratch *Scratch, free map[string]api.Resources, receivers func() func(int, *Machine) bool) *simulation {
	return &simulation{in: ms, scratch: scratch, free: free, receivers: receivers}
}

// build copies the joined machines into the what-if session.
func (s *simulation) build() {
	if s.built {
		return
	}
	s.built, s.sorted = true, true
	ms := s.in
	s.idleIn = map[string]int{}
	var receives func(int, *Machine) bool
	if s.receivers != nil {
		receives = s.receivers()
	}
	in := s.scratch.receivers[:0]
	for i, m := range ms {
		if !m.Joined {
			continue
		}
		if len(m.Replicas) == 0 { // not its count of services: a look reads every machine, and that count is a map's
			s.idleIn[Key(m.Cluster, m.Group)]++
		}
		if receives != nil && !receives(i, m) {
			s.leftOut++
			continue
		}
		in = append(in, m)
	}
	// In one allocation, only as many as go in (a fleet's worth is zeroed
	// otherwise).
	s.scratch.receivers = in
	copies := sized(&s.scratch.whatIfs, len(in))
	s.machines, s.ids, s.replicas = sized(&s.scratch.whatIfMachines, len(in)), sized(&s.scratch.whatIfIDs, len(in)), sized(&s.scratch.whatIfReplicas, len(in))
	for k, m := range in {
		if !s.inputByID && k > 0 && s.ids[k-1] >= m.ID {
			s.sorted = false
		}
		// Shared, clipped: the what-ifs only append (which copies) and
		// read.
		s.replicas[k] = slices.Clip(m.Replicas)
		m.ShareInto(&copies[k]) // its counts copied when a what-if moves a replica on or off
		s.machines[k], s.ids[k] = &copies[k], m.ID
	}
	// moveAway keeps no result past its what-if, and evicts no one.
	s.session = scheduler.NewSession(s.machines).ReuseWhatIfs().NoPreempting()
}

// at is the place of the what-ifs' machine of id, one of their session.
func (s *simulation) at(id string) int {
	i, _ := s.place(id)
	return i
}

// place is the place of the what-ifs' machine of id; false: the machine
// is out of their session, as one that could take none of the
// candidates' replicas (it never takes one, and is as it was).
func (s *simulation) place(id string) (int, bool) {
	if s.sorted {
		return slices.BinarySearch(s.ids, id)
	}
	if s.byID == nil {
		s.byID = make(map[string]int, len(s.ids))
		for i, id := range s.ids {
			s.byID[id] = i
		}
	}
	i, in := s.byID[id]
	return i, in
}

// machine is a joined machine as the what-ifs left it.
func (s *simulation) machine(m *Machine) *scheduler.Machine {
	if k, in := s.placeOf(m); in {
		return s.machines[k]
	}
	return m.Machine
}

// replicasOn is what a joined machine holds now.
func (s *simulation) replicasOn(m *Machine) []scheduler.Replica {
	if k, in := s.placeOf(m); in {
		return s.replicas[k]
	}
	return m.Replicas
}

// placeOf is m's place in the session, once built (false: not built, or
// out of it). A candidate's what-if asks for its place several times, one
// after another: the last answer is kept (a search of every machine's id
// each time was a tenth of a look that found nothing at 10,000 machines).
func (s *simulation) placeOf(m *Machine) (int, bool) {
	if !s.built {
		return 0, false
	}
	if m != s.last.m {
		s.last.m = m
		s.last.at, s.last.in = s.place(m.ID)
	}
	return s.last.at, s.last.in
}

// remove takes a machine out; what it held must have moved first.
func (s *simulation) remove(pm *Machine) {
	s.build()
	k, in := s.placeOf(pm)
	m, held := pm.Machine, pm.Replicas
	if in {
		m, held = s.machines[k], s.replicas[k]
		s.session.Exclude(m, true)
	}
	if len(held) == 0 {
		s.idleIn[Key(m.Cluster, m.Group)]--
	}
	s.free[m.Cluster] = s.free[m.Cluster].Sub(m.Free())
}

// moveAway places a machine's replicas on the others, keeping at least
// warmPool idle machines in its group; on success the move is kept (later
// candidates see it), on failure it is undone.
func (s *simulation) moveAway(m *Machine, warmPool int) bool {
	mine := s.machine(m)
	if !roomBeside(s.free[mine.Cluster], mine) {
		return false
	}
	s.build()
	if !s.noShortcuts && s.noGain(mine) {
		s.gainless++
		return false
	}
	// A machine out of the session (it could take none of the candidates'
	// replicas) has nothing to leave it: its replicas are placed on the
	// session's machines alone.
	k, in := s.placeOf(m)
	held := m.Replicas
	if in {
		mine, held = s.machines[k], s.replicas[k]
		// The replicas leave first, so that spread rules count them where
		// they go, not where they were (the machine is out of the what-if,
		// so its GPU devices need no booking).
		for _, r := range held {
			scheduler.Unassign(mine, r, nil)
		}
		s.session.Exclude(mine, true)
	} else {
		s.outside++
	}
	res, ok := s.placeAll(held, mine.PricePerHour)
	byID := heldByID(held)
	if ok && s.keeps(mine, res, warmPool) {
		for _, pl := range res.Placements {
			to := s.at(pl.MachineID)
			s.replicas[to] = append(s.replicas[to], byID(pl.ReplicaID))
		}
		moved := mine.Allocated
		s.remove(m)
		s.free[mine.Cluster] = s.free[mine.Cluster].Sub(moved)
		if in {
			s.replicas[k] = nil
		}
		return true
	}
	for _, pl := range res.Placements {
		scheduler.Unassign(s.machines[s.at(pl.MachineID)], byID(pl.ReplicaID), pl.GPUs)
	}
	if in {
		s.session.Exclude(mine, false)
		for _, r := range held {
			s.session.Rebook(mine, r, nil)
		}
	}
	return false
}

// placeAll places held for the what-if of a machine of price, stopping
// once the machines it fills (empty before it) cost price or more
// together: keeps would refuse it (a move that fills machines as dear as
// the one it empties saves nothing), so the rest of it need not be
// placed. Most of a late week's what-ifs at 10,000 machines were
// refused so. None of held may preempt (the session's NoPreempting): a
// what-if evicts no one.
func (s *simulation) placeAll(held []scheduler.Replica, price float64) (scheduler.Result, bool) {
	if s.noShortcuts {
		return s.session.PlaceAll(held)
	}
	// Summed in the placements' order, as filled sums it: a sum of prices
	// of none below zero only grows. A price below zero ends no what-if.
	filledCost, belowZero := 0.0, false
	var filled []*scheduler.Machine
	return s.session.PlaceAllOn(held, func(m *scheduler.Machine) bool {
		if !s.emptyBefore(m) || slices.Contains(filled, m) {
			return true
		}
		filled = append(filled, m)
		filledCost += m.PricePerHour
		belowZero = belowZero || m.PricePerHour < 0
		if filledCost < price || belowZero {
			return true
		}
		s.cutShort++
		return false
	})
}

// emptyBefore says a machine of the session held no replica before the
// what-if under way (its replicas, moves kept included, are appended
// only once a what-if is kept). Empty is what a machine's replicas say,
// as the look's counts and the planner's idle times read it.
func (s *simulation) emptyBefore(m *scheduler.Machine) bool {
	return len(s.replicas[s.at(m.ID)]) == 0
}

// heldByID finds a replica of held by its id (the last of that id; none:
// the zero replica), by a look through them when they are few, as a
// machine's mostly are (a map made for each what-if was 3% of the
// what-ifs' time at 10,000 machines).
func heldByID(held []scheduler.Replica) func(string) scheduler.Replica {
	const few = 16
	if len(held) > few {
		byID := make(map[string]scheduler.Replica, len(held))
		for _, r := range held {
			byID[r.ID] = r
		}
		return func(id string) scheduler.Replica { return byID[id] }
	}
	return func(id string) scheduler.Replica {
		for i := len(held) - 1; i >= 0; i-- {
			if held[i].ID == id {
				return held[i]
			}
		}
		return scheduler.Replica{}
	}
}

// keeps says whether a what-if that placed all of mine's replicas is
// kept: its group keeps warmPool idle machines, and the machines it
// filled cost less than mine; if so, their groups count them busy. (A
// what-if that placed not all of them is undone without this count of
// the machines it filled.)
func (s *simulation) keeps(mine *scheduler.Machine, res scheduler.Result, warmPool int) bool {
	filled, filledCost, filledFree := s.filled(res)
	if key := Key(mine.Cluster, mine.Group); s.idleIn[key]-filled[key] < warmPool || filledCost >= mine.PricePerHour {
		return false
	}
	for g, n := range filled {
		s.idleIn[g] -= n
	}
	s.busyFree[mine.Cluster] = s.busyFree[mine.Cluster].Add(filledFree)
	return true
}

// filled counts, per group, the machines a what-if's placements found
// empty, and what they cost together: an empty machine would go, so a
// move that fills one as dear as the machine it empties saves nothing.
// (Allowed, it moved a replica from a replacement onto the empty machine
// it replaced, which was then replaced again, every minute.)
func (s *simulation) filled(res scheduler.Result) (map[string]int, float64, api.Resources) {
	var order []*scheduler.Machine // the placements' order: the cost is summed the same way every time
	for _, pl := range res.Placements {
		if m := s.machines[s.at(pl.MachineID)]; !slices.Contains(order, m) { // a what-if fills few
			order = append(order, m)
		}
	}
	out := map[string]int{}
	cost, free := 0.0, api.Resources{}
	for _, m := range order {
		if s.emptyBefore(m) {
			out[Key(m.Cluster, m.Group)]++
			cost += m.PricePerHour
			free = free.Add(m.Allocatable) // empty before the move: all of it was free
		}
	}
	return out, cost, free
}

// noGain says a move of m's replicas cannot pay: they do not fit the
// free capacity of the cluster's other machines that hold replicas, so
// any move fills an empty machine, and none is cheaper than m. It spares
// the what-if (each one refused walks the next candidate's).
func (s *simulation) noGain(m *scheduler.Machine) bool {
	least, ok := s.cheapestEmpty[m.Cluster]
	return noGain(s.busyFree[m.Cluster], least, ok, m.PricePerHour, m.Free(), usedOf(m))
}

// noGain is simulation.noGain's answer for a machine of price with free
// and used room, in a cluster of busyFree whose cheapest empty machine
// costs least (none: !anyEmpty).
func noGain(busyFree api.Resources, least float64, anyEmpty bool, price float64, free, used api.Resources) bool {
	if !anyEmpty || least < price {
		return false
	}
	return !busyFree.Sub(noneBelowZero(free)).Fits(used)
}

// noneBelowZero is r with each amount below zero counted as none: an
// overcommitted machine has no room, and takes none from the others'.
func noneBelowZero(r api.Resources) api.Resources {
	return api.Resources{MilliCPU: max(r.MilliCPU, 0), MemoryBytes: max(r.MemoryBytes, 0), EphemeralBytes: max(r.EphemeralBytes, 0), GPUs: max(r.GPUs, 0)}
}

// NextCandidate is the earliest time after now that a joined machine
// becomes a candidate it is not yet: empty for EmptyMachineTTL, or older
// than MinLifetime (zero: none). A plan that removed nothing may remove
// something then, with nothing else changed.
func NextCandidate(cfg Config, machines []*Machine, now time.Time) time.Time {
	c := NewCandidateClock(cfg, now)
	for _, m := range machines {
		c.See(m)
	}
	return c.Next()
}

// CandidateClock finds NextCandidate's time one machine at a time, for a
// caller that walks the machines anyway.
type CandidateClock struct {
	cfg   Config
	now   time.Time
	first time.Time
	// A machine idle since idleBy or before, or made by madeBy, is a
	// candidate already: two comparisons a machine, not two sums of
	// times.
	idleBy, madeBy time.Time
}

// NewCandidateClock is a clock that has seen no machine.
func NewCandidateClock(cfg Config, now time.Time) CandidateClock {
	return CandidateClock{cfg: cfg, now: now, idleBy: now.Add(-cfg.EmptyMachineTTL), madeBy: now.Add(-cfg.MinLifetime)}
}

// See counts a machine in.
func (c *CandidateClock) See(m *Machine) {
	if !m.Joined {
		return
	}
	if !m.IdleSince.IsZero() && m.IdleSince.After(c.idleBy) {
		c.note(m.IdleSince.Add(c.cfg.EmptyMachineTTL))
	}
	if m.CreatedAt.After(c.madeBy) {
		c.note(m.CreatedAt.Add(c.cfg.MinLifetime))
	}
}

func (c *CandidateClock) note(t time.Time) {
	if t.After(c.now) && (c.first.IsZero() || t.Before(c.first)) {
		c.first = t
	}
}

// Next is the time NextCandidate gives for the machines seen.
func (c *CandidateClock) Next() time.Time { return c.first }
