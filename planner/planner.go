// Package planner decides what machines each capacity group needs. It is a
// pure function of a snapshot: groups with their allowed instance types and
// offerings, the live machines, the replicas on them and the replicas
// waiting for capacity. It places what it can on machines that exist or are
// on their way, opens the cheapest suitable offering for the rest (through
// the scheduler, so every placement rule holds on new machines too),
// right-sizes what it opened, and finds machines to remove.
package planner

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/scheduler"
)

// Config tunes the planner.
type Config struct {
	// EmptyMachineTTL is how long a machine must stay empty before it is
	// removed, so short gaps in demand do not churn machines.
	EmptyMachineTTL time.Duration
	// MinLifetime: no machine younger than this is consolidated away.
	MinLifetime time.Duration
	// SavingsFloor is the least fraction of a machine's price a
	// replacement must save.
	SavingsFloor float64
	// MaxRemovals bounds the machines removed or replaced in one plan.
	MaxRemovals int
	// SkipBound leaves the plan's LowerBound and Gap out. The LP bound is
	// for whoever reads the plan (`gantry plan`, the cost report); a
	// control loop's passes act on the plan alone and skip it.
	SkipBound bool `json:"-"`
	// CheckLookRecords: a look that takes the last look's records of the
	// machines (Input.MachineIDs) walks every machine too, and panics
	// when the two differ. A check for tests and the simulator's check
	// runs; off, a look reads only the machines changed since the last.
	CheckLookRecords bool `json:"-"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{EmptyMachineTTL: 5 * time.Minute, MinLifetime: 10 * time.Minute, SavingsFloor: 0.10, MaxRemovals: 1}
}

// Group is one capacity group in the snapshot.
type Group struct {
	Cluster  string
	ID       string
	MinSize  int
	MaxSize  int
	WarmPool int
	// CapacityType is onDemand, spot or any.
	CapacityType string
	// Zones it may launch in; empty means every zone of its offerings.
	Zones    []string
	Labels   map[string]string
	Runtimes []string
	TEE      bool
	Reserved api.Resources
	// Types are the instance types the group may launch.
	Types []provisioner.InstanceType
	// Live counts machines launched or running and not going away
	// (stopped warm-pool machines included).
	Live int
	// WarmStopped: the warm pool is kept as stopped machines; Stopped is
	// how many there are now.
	WarmStopped bool
	Stopped     int
}

// Key is a group's key in plan maps.
func Key(cluster, group string) string { return cluster + "/" + group }

// Machine is a live machine: joined, or launched and not joined yet.
type Machine struct {
	*scheduler.Machine
	Joined    bool
	CreatedAt time.Time
	// IdleSince is when it last had no replica (zero when it has some).
	IdleSince time.Time
	// Replicas run here (for consolidation).
	Replicas []scheduler.Replica
	// DoNotDisrupt keeps consolidation from moving its replicas away
	// (Karpenter's do-not-disrupt): it runs a failover group's member,
	// whose data lives on the machine.
	DoNotDisrupt bool
	// Asks, when AsksKnown, counts every replica of Replicas (it may
	// count more, of replicas gone since: it then asks at most as much):
	// consolidation's what-ifs merge their candidates' instead of reading
	// every replica of each (a pass's booking keeps it for each machine).
	Asks      scheduler.Asks
	AsksKnown bool
}

// Input is the snapshot to plan for.
type Input struct {
	Groups   []*Group
	Machines []*Machine
	// MachinesByID promises that Machines come in order of id, as a pass
	// hands them: consolidation then takes the order as given rather
	// than comparing each id with the last (a compare of every machine's
	// id each look, most of them sharing a long prefix). False: it looks.
	MachinesByID bool
	// Pending replicas have no machine yet.
	Pending     []scheduler.Replica
	Unavailable Unavailable
	Now         time.Time
	// Subnets is how many machines each cluster can still add before its
	// containerCidr runs out of /24s (no entry: unlimited).
	Subnets map[string]Subnets
	// SkipConsolidation plans additions alone: no machine is removed or
	// replaced (the control loop consolidates at most every
	// decide.Config.ConsolidateInterval).
	SkipConsolidation bool
	// Scratch is memory the plan may work in (nil: its own), kept by a
	// caller that plans pass after pass.
	Scratch *Scratch `json:"-"`
	// Sums, when set, is what a walk of Machines would sum: a caller
	// that keeps them from pass to pass spares a plan that neither
	// consolidates nor fills a warm pool its walk of every machine.
	Sums *MachineSums `json:"-"`
	// Rooms, when set, are the rooms of Machines, place by place, as
	// Machine.Room would read them: a caller that keeps the rooms beside
	// its machines spares a plan that places pending replicas a read of
	// each machine to learn which could take one, or has residents whose
	// rules the placing must learn, and a look for machines to remove
	// the same of each machine that could take a candidate's replicas.
	Rooms []scheduler.Room `json:"-"`
	// MachineIDs, when set, are the ids of Machines, place by place (by
	// id: MachinesByID), from a caller that tells Scratch of every
	// machine it changed since its last plan (Scratch.NoteMachineChanged,
	// or ForgetMachines): a look for machines to remove then reads again
	// only those, the new ones and the empty ones, and takes what the
	// last look read of the rest.
	MachineIDs []string `json:"-"`
}

// MachineSums is what a plan that leaves consolidation out reads of every
// machine: their prices, summed in the order of Input.Machines (the same
// additions, so the same sum to the bit), and the clusters with a
// machine not joined. A plan only reads them: a caller may hand the
// same sums to many.
type MachineSums struct {
	PricePerHour float64
	Unjoined     map[string]bool
}

// Subnets is a cluster's /24 budget.
type Subnets struct {
	CIDR string
	Free int
}

// The plan's parts are API types (a server answers `gantry plan` with
// them); the planner names them as its own.
type (
	NewMachine       = api.NewMachine
	Removal          = api.MachineRemoval
	ReplicaPlacement = api.ReplicaPlacement
	PendingReplica   = api.PendingReplica
	Plan             = api.CapacityPlan
)

// Compute plans for the snapshot.
func Compute(cfg Config, in Input) Plan { return compute(cfg, in, false) }

// compute is Compute; noShortcuts takes none of the shortcuts that must
// change no plan (the tests that they do not): it builds the placing
// sessions even with nothing pending, and consolidation walks every
// candidate.
func compute(cfg Config, in Input, noShortcuts bool) Plan {
	plan, _ := computeKept(cfg, in, noShortcuts)
	return plan
}

// computeKept is compute, with the planning of the plan it kept.
func computeKept(cfg Config, in Input, noShortcuts bool) (Plan, *planning) {
	plan, p := computeWith(cfg, in, noShortcuts, false)
	if 2*p.spreadAlone >= len(in.Pending) && p.spreadAlone > 0 {
		// Most of what is pending are services whose only rule is a
		// machine spread, with none that keep apart: the scheduler's
		// spread placement packs some mixes better, dealing them over an
		// LP fleet others (held-out seed 8006: 32.9% -> 13.9%; suite
		// seed 2016: 11.3% -> 14.9%). Both keep every rule: the cheaper
		// is kept. (A few spread services among many others are not
		// worth planning twice.)
		if dealt, pd := computeWith(cfg, in, noShortcuts, true); len(dealt.Pending) <= len(plan.Pending) && dealt.CostAfter < plan.CostAfter*(1-1e-9) {
			plan, p = dealt, pd
		}
	}
	if !cfg.SkipBound {
		p.bound(&plan) // of the plan kept alone: the bound is the dearer part
	}
	return plan, p
}

// computeWith is compute, spread services dealt like services that keep
// apart when dealSpread (see place).
func computeWith(cfg Config, in Input, noShortcuts, dealSpread bool) (Plan, *planning) {
	plan, p := planOnce(cfg, in, noShortcuts, dealSpread, false)
	if p.outOfPlace.machines > 0 && len(plan.Pending) > 0 {
		// A replica left waiting is told what each machine lacks: its
		// sessions must have had every machine.
		return planOnce(cfg, in, noShortcuts, dealSpread, true)
	}
	return plan, p
}

// planOnce is computeWith, its placing sessions with every machine when
// wholeSessions.
func planOnce(cfg Config, in Input, noShortcuts, dealSpread, wholeSessions bool) (Plan, *planning) {
	p := &planning{cfg: cfg, in: in, groups: map[string]*Group{}, added: map[string]int{}, noShortcuts: noShortcuts, dealSpread: dealSpread,
		wholeSessions: wholeSessions}
	for _, g := range in.Groups {
		p.groups[Key(g.Cluster, g.ID)] = g
	}
	p.catalog = newOfferingIndex(in.Groups, in.Pending, in.Unavailable, in.Now)
	in.Pending = withoutPreempting(withZoneDomains(in.Pending, in.Groups))
	p.in.Pending = in.Pending
	res, machines := p.placeAndCompact(in)
	p.dropEmptyBins()
	p.rightSize()
	if p.downsize(machines, &res) {
		p.dropEmptyBins()
		p.rightSize()
	}
	p.solveExactly(&res)
	plan := Plan{Desired: map[string]int{}}
	p.collect(&plan, res)
	p.walk = p.walkFleet(&plan)
	p.floorBins(&plan)
	if !in.SkipConsolidation {
		plan.Remove = p.consolidate(&plan)
	}
	p.totals(&plan)
	// Empty lists, not nulls: the JSON form is a documented interface.
	plan.Add, plan.Remove = api.NonNil(plan.Add), api.NonNil(plan.Remove)
	plan.Placements, plan.Pending = api.NonNil(plan.Placements), api.NonNil(plan.Pending)
	return plan, p
}

// withoutPreempting is replicas, none of them allowed to preempt: a plan
// puts replicas only where they fit as the machines are. Evicting a
// lower-priority replica is the scheduler's, before it hands the planner
// what still waits; the plan has no evictions to tell, and a placement
// that made room by one named a machine the replica does not fit. A
// consolidation that moved a replica by evicting another emptied a
// machine by displacing a replica, which then waited for a machine of its
// own (Karpenter's consolidation moves no pod that would have to preempt
// one), and a refused what-if left its evictions' room behind for the
// next.
func withoutPreempting(replicas []scheduler.Replica) []scheduler.Replica {
	if !slices.ContainsFunc(replicas, func(r scheduler.Replica) bool { return r.Rules != nil && r.Preempt }) {
		return replicas
	}
	out := slices.Clone(replicas)
	calm := map[*scheduler.Rules]*scheduler.Rules{} // one copy of each revision's rules, shared as the rules were
	for i := range out {
		rules := out[i].Rules
		if rules == nil || !rules.Preempt {
			continue
		}
		if calm[rules] == nil {
			c := *rules
			c.Preempt = false
			calm[rules] = &c
		}
		out[i].Rules = calm[rules]
	}
	return out
}

// placeAndCompact places the pending replicas and compacts the machines
// it opened. With nothing pending it only opens what groups below their
// minimum need: the sessions it would build (every live machine cloned
// and sorted, every resident learnt: 500,000 at 50,000 machines) would
// have nothing to place.
func (p *planning) placeAndCompact(in Input) (scheduler.Result, []*scheduler.Machine) {
	if len(in.Pending) == 0 && !p.noShortcuts {
		p.openMinSize()
		return scheduler.Result{Unplaced: map[string]string{}}, nil
	}
	res, machines := p.place(in)
	if len(p.bins) == 0 {
		return res, machines // nothing opened: nothing to compact
	}
	compaction := scheduler.NewSession(machines)
	compaction.Learn(in.Pending)
	p.compact(compaction, &res, in.Pending)
	return res, machines
}

// place puts pending replicas on live machines and opens new ones, one
// priority at a time: services that keep one replica per machine first
// (placeExclusive), then the other replicas with placement rules (the
// ordinary opener); then those without fill what room is left; the rest, and those
// whose only rule is about zones (pinZones), get machines in the
// proportions of the LP mix (placeByMix); what that leaves goes through
// the ordinary opener.
func (p *planning) place(in Input) (scheduler.Result, []*scheduler.Machine) {
	session := scheduler.NewSession(append(p.shareMachines(p.placeReceivers(in.Pending)), p.openMinSize()...)).Balance(totalDemand(in.Pending))
	shunned, anyTerms := shunnedServices(in)
	exclusive := exclusiveServices(in, anyTerms)
	live := sync.OnceValue(func() map[string]bool { return liveServices(in) }) // only if a pending replica asks
	spreadOnly := spreadOnlyServices(in, shunned, live)
	zones := p.pinZones(in, shunned, live)
	res := scheduler.Result{Unplaced: map[string]string{}}
	for _, level := range byPriority(in.Pending) {
		var ruled, pinned, alone, spread []scheduler.Replica
		free := make([]scheduler.Replica, 0, len(level)) // mostly all of them: not grown by appends
		for _, r := range level {
			switch {
			case shapeable(&r, shunned):
				free = append(free, r)
			case zones[r.ID] != "":
				pinned = append(pinned, r)
			case exclusivePackable(&r, exclusive):
				alone = append(alone, r)
			case spreadOnly[r.Service]:
				spread = append(spread, r)
			default:
				ruled = append(ruled, r)
			}
		}
		switch {
		case len(alone) > 0 || p.dealSpread && len(spread) > 0:
			// Beside services that keep apart, spread services are dealt
			// with them (see packExclusive); alone, when asked (compute
			// tries both).
			alone = append(alone, spread...)
		default:
			p.spreadAlone += len(spread)
			ruled = append(ruled, spread...)
		}
		p.placeExclusive(session, alone, &res)
		merge(&res, session.Place(ruled, p.open))
		filled := session.Fill(free)
		merge(&res, scheduler.Result{Placements: filled.Placements, Evictions: filled.Evictions})
		rest := pinned
		for _, r := range free {
			if _, ok := filled.Unplaced[r.ID]; ok {
				rest = append(rest, r)
			}
		}
		opened, left := p.placeByMix(rest, zones, &res)
		session.Add(opened...)
		session.Learn(rest)
		merge(&res, session.Place(left, p.open))
	}
	return res, session.Machines()
}

// placeExclusive puts exclusive replicas (see packExclusive) on the room
// machines have first, then packs the rest, cluster by cluster.
func (p *planning) placeExclusive(session *scheduler.Session, rs []scheduler.Replica, res *scheduler.Result) {
	if len(rs) == 0 {
		return
	}
	filled := session.Fill(rs)
	merge(res, scheduler.Result{Placements: filled.Placements, Evictions: filled.Evictions})
	byCluster := map[string][]scheduler.Replica{}
	var clusters []string
	for _, r := range rs {
		if _, ok := filled.Unplaced[r.ID]; !ok {
			continue
		}
		if _, ok := byCluster[r.Cluster]; !ok {
			clusters = append(clusters, r.Cluster)
		}
		byCluster[r.Cluster] = append(byCluster[r.Cluster], r)
	}
	sort.Strings(clusters)
	var left []scheduler.Replica
	for _, c := range clusters {
		opened, rest := p.packExclusive(byCluster[c], res)
		session.Add(opened...)
		left = append(left, rest...)
	}
	session.Learn(rs)
	merge(res, session.Place(left, p.open))
}

// byPriority groups replicas by priority, highest first.
func byPriority(rs []scheduler.Replica) [][]scheduler.Replica {
	if !slices.ContainsFunc(rs, func(r scheduler.Replica) bool { return r.Priority != rs[0].Priority }) {
		return [][]scheduler.Replica{rs}
	}
	levels := map[int][]scheduler.Replica{}
	var prios []int
	for _, r := range rs {
		if _, ok := levels[r.Priority]; !ok {
			prios = append(prios, r.Priority)
		}
		levels[r.Priority] = append(levels[r.Priority], r)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(prios)))
	out := make([][]scheduler.Replica, len(prios))
	for i, pr := range prios {
		out[i] = levels[pr]
	}
	return out
}

func merge(into *scheduler.Result, part scheduler.Result) {
	into.Placements = append(into.Placements, part.Placements...)
	into.Evictions = append(into.Evictions, part.Evictions...)
	for id, why := range part.Unplaced {
		into.Unplaced[id] = why
	}
}

type planning struct {
	cfg     Config
	in      Input
	groups  map[string]*Group
	catalog *offeringIndex
	bins    []*bin
	// opened are the machines the plan opened, those compaction
	// dropped from bins too.
	opened []*scheduler.Machine
	added  map[string]int
	// noShortcuts: see compute.
	noShortcuts bool
	// leftOut counts the machines consolidation left out as unable to
	// go (mayGo).
	leftOut int
	// outOfWhatIfs counts the machines consolidation's what-ifs left out
	// of their session as unable to take any candidate's replica
	// (mayReceive): tests see the shortcut taken.
	outOfWhatIfs int
	// whatIfsOutside counts the what-ifs of candidates out of that
	// session (tests see them tried).
	whatIfsOutside int
	// gainless counts the moves refused without a what-if (noGain; tests),
	// gainlessAtStart the candidates mayGo left out so, and cutShort the
	// what-ifs ended before their last replica (placeAll).
	gainless, gainlessAtStart, cutShort int
	// outOfPlace are the machines the placing sessions left out as
	// unable to take any pending replica (placeReceivers), and receives
	// says which they let in; wholeSessions leaves none out (see
	// computeWith).
	outOfPlace    roomLeftOut
	receives      func(int, *Machine) bool
	wholeSessions bool
	// dealSpread: deal spread services like services that keep apart
	// even with none of those; spreadAlone counts the spread replicas
	// the scheduler placed for want of them (compute may then try
	// dealing them).
	dealSpread  bool
	spreadAlone int
	// removedAt are the places in the input of the machines
	// consolidation removed, as it removed them.
	removedAt []int32
	// walk is the one walk of the input's machines, made for floorBins
	// and read by the steps after it.
	walk *fleetWalk
}

// subnetsLeft reports whether the cluster can hold one more machine, and
// why not.
func (p *planning) subnetsLeft(cluster string) (bool, string) {
	budget, limited := p.in.Subnets[cluster]
	if !limited {
		return true, ""
	}
	used := 0
	for key, n := range p.added {
		if g := p.groups[key]; g != nil && g.Cluster == cluster {
			used += n
		}
	}
	if used < budget.Free {
		return true, ""
	}
	return false, fmt.Sprintf("no free /24 left in containerCidr %s of cluster %s", budget.CIDR, cluster)
}

// bin is a machine the plan opens.
type bin struct {
	m        *scheduler.Machine
	group    *Group
	itype    provisioner.InstanceType
	offering provisioner.Offering
	reason   string
	// floor: opened for minSize, kept even if nothing lands on it.
	floor bool
}

// openMinSize opens the machines groups below minSize need before any
// placement, so that replicas (and spread rules) can use them.
func (p *planning) openMinSize() []*scheduler.Machine {
	var out []*scheduler.Machine
	for _, g := range p.in.Groups {
		key := Key(g.Cluster, g.ID)
		for g.Live+p.added[key] < g.MinSize {
			if ok, _ := p.subnetsLeft(g.Cluster); !ok {
				break
			}
			cand := p.catalog.cheapestFor(g)
			if cand == nil {
				break
			}
			p.added[key]++
			b := &bin{group: g, itype: cand.itype, offering: cand.offering, floor: true,
				reason: fmt.Sprintf("group below minSize %d", g.MinSize)}
			b.m = newMachine(fmt.Sprintf("new-%d", len(p.bins)+1), g, cand.itype, cand.offering)
			p.bins, p.opened = append(p.bins, b), append(p.opened, b.m)
			out = append(out, b.m)
		}
	}
	return out
}

// withZoneDomains: for zone spread, every zone a replica's groups can
// launch in is a domain, machine or not (as Karpenter counts a node pool's
// zones), so a plan spreads from the first machine on.
func withZoneDomains(pending []scheduler.Replica, groups []*Group) []scheduler.Replica {
	groupZones := map[*Group][]string{}
	for _, g := range groups {
		set := map[string]bool{}
		for _, it := range g.Types {
			for _, o := range it.Offerings {
				if (len(g.Zones) == 0 || slices.Contains(g.Zones, o.Zone)) && capacityTypeAllowed(g.CapacityType, o.CapacityType) {
					set[o.Zone] = true
				}
			}
		}
		for z := range set {
			groupZones[g] = append(groupZones[g], z)
		}
	}
	out := make([]scheduler.Replica, len(pending))
	copy(out, pending)
	memo := map[string][]string{} // by cluster and group pinning
	widened := map[*scheduler.Rules]*scheduler.Rules{}
	for i := range out {
		r := &out[i]
		if !hasZoneSpread(r) && !keptApartInZones(r) {
			continue
		}
		if w, ok := widened[r.Rules]; ok {
			r.Rules = w
			continue
		}
		key := r.Cluster + "|" + strings.Join(r.Groups, ",") + "|" + strings.Join(r.ZoneDomains, ",")
		zones, ok := memo[key]
		if !ok {
			zones = zoneDomains(r, groups, groupZones)
			memo[key] = zones
		}
		shared := r.Rules
		*r = r.Reruled(func(rules *scheduler.Rules) { rules.ZoneDomains = zones })
		widened[shared] = r.Rules
	}
	return out
}

// zoneDomains are the replica's zones and those of every group it may
// launch in, sorted.
func zoneDomains(r *scheduler.Replica, groups []*Group, groupZones map[*Group][]string) []string {
	set := map[string]bool{}
	for _, z := range r.ZoneDomains {
		set[z] = true
	}
	for _, g := range groups {
		if g.Cluster == r.Cluster && (len(r.Groups) == 0 || slices.Contains(r.Groups, g.ID)) {
			for _, z := range groupZones[g] {
				set[z] = true
			}
		}
	}
	zones := make([]string, 0, len(set))
	for z := range set {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	return zones
}

// keptApartInZones: a required anti-affinity on zone; the zones it may
// use are the scheduler's choices of a zone for a new machine (without
// them it knew only the zones its matches run in, and opened the new
// machine in one of those, where it could not go).
func keptApartInZones(r *scheduler.Replica) bool {
	if r.Terms == nil {
		return false
	}
	return slices.ContainsFunc(r.Terms.AntiAffinity, func(t api.AffinityTerm) bool { return t.Required() && t.Topology == api.SpreadZone })
}

func hasZoneSpread(r *scheduler.Replica) bool {
	for _, s := range r.Spread {
		if s.Key == api.SpreadZone {
			return true
		}
	}
	return false
}

func totalDemand(rs []scheduler.Replica) api.Resources {
	var d api.Resources
	for _, r := range rs {
		d = d.Add(r.Requests)
	}
	return d
}

// open makes a new machine for a replica that fits nowhere: the offering
// with the lowest price per unit of the cluster's pending demand.
func (p *planning) open(r *scheduler.Replica, zoneHint string) (*scheduler.Machine, string) {
	if ok, why := p.subnetsLeft(r.Cluster); !ok {
		return nil, "no machine can be added: " + why
	}
	cand, why := p.catalog.best(r, zoneHint, p.hasRoom)
	if cand == nil {
		return nil, why
	}
	return p.openCandidate(cand, r), ""
}

func (p *planning) hasRoom(g *Group) bool { return g.Live+p.added[Key(g.Cluster, g.ID)] < g.MaxSize }

// openCandidate adds a machine of the candidate's offering, opened for r.
func (p *planning) openCandidate(cand *candidate, r *scheduler.Replica) *scheduler.Machine {
	p.added[Key(cand.group.Cluster, cand.group.ID)]++
	b := &bin{group: cand.group, itype: cand.itype, offering: cand.offering,
		reason: fmt.Sprintf("pending replicas need capacity (first: %s)", r.ID)}
	b.m = newMachine(fmt.Sprintf("new-%d", len(p.bins)+1), cand.group, cand.itype, cand.offering)
	p.bins, p.opened = append(p.bins, b), append(p.opened, b.m)
	return b.m
}

func newMachine(id string, g *Group, it provisioner.InstanceType, o provisioner.Offering) *scheduler.Machine {
	m := &scheduler.Machine{
		ID: id, Cluster: g.Cluster, Group: g.ID, Zone: o.Zone, CapacityType: o.CapacityType,
		Labels: g.Labels, Runtimes: g.Runtimes, TEE: g.TEE, PricePerHour: o.PricePerHour,
		Allocatable: api.Allocatable(it.Resources(), g.Reserved), ServiceCount: map[string]int{},
	}
	m.GPUs = devicesOf(it)
	return m
}

func devicesOf(it provisioner.InstanceType) []scheduler.GPU {
	var out []scheduler.GPU
	for _, g := range it.GPUs {
		for i := 0; i < g.Count; i++ {
			out = append(out, scheduler.GPU{Index: len(out), Type: g.Type, VRAMGB: g.VRAMGB})
		}
	}
	return out
}

// dropEmptyBins forgets bins a spread rule kept empty.
func (p *planning) dropEmptyBins() {
	kept := p.bins[:0]
	for _, b := range p.bins {
		if len(b.m.ServiceCount) > 0 || b.floor {
			kept = append(kept, b)
		} else {
			p.added[Key(b.group.Cluster, b.group.ID)]--
		}
	}
	p.bins = kept
}

// rightSize moves each bin to the cheapest offering of its group, zone and
// capacity policy that still holds what the plan put on it.
func (p *planning) rightSize() {
	for _, b := range p.bins {
		if len(b.m.ServiceCount) > 0 && b.floor {
			b.reason += " (and holds pending replicas)"
		}
		if cand := p.catalog.cheapestHolding(b); cand != nil && cand.offering.PricePerHour < b.offering.PricePerHour {
			b.itype, b.offering = cand.itype, cand.offering
			b.m.Allocatable = api.Allocatable(cand.itype.Resources(), b.group.Reserved)
			used := usedGPUs(b.m)
			b.m.GPUs = devicesOf(cand.itype)
			for i := 0; i < used; i++ {
				b.m.GPUs[i].Used = true
			}
			b.m.CapacityType, b.m.PricePerHour = cand.offering.CapacityType, cand.offering.PricePerHour
		}
	}
}

func usedGPUs(m *scheduler.Machine) int {
	n := 0
	for _, g := range m.GPUs {
		if g.Used {
			n++
		}
	}
	return n
}

func (p *planning) collect(plan *Plan, res scheduler.Result) {
	byBin := map[string]*NewMachine{}
	rename := map[string]string{} // bins dropped on the way leave gaps: number them again
	for i, b := range p.bins {
		rename[b.m.ID] = fmt.Sprintf("new-%d", i+1)
	}
	for _, b := range p.bins {
		nm := NewMachine{Key: rename[b.m.ID], Cluster: b.group.Cluster, Group: b.group.ID, InstanceType: b.itype.Name,
			Zone: b.offering.Zone, CapacityType: b.offering.CapacityType, PricePerHour: b.offering.PricePerHour, Reason: b.reason}
		plan.Add = append(plan.Add, nm)
	}
	for i := range plan.Add {
		byBin[plan.Add[i].Key] = &plan.Add[i]
	}
	plan.Placements = make([]ReplicaPlacement, 0, len(res.Placements)) // tens of thousands at a launch: not grown by appends
	for _, pl := range res.Placements {
		machine := pl.MachineID
		if key, ok := rename[machine]; ok {
			machine = key
		}
		plan.Placements = append(plan.Placements, ReplicaPlacement{Replica: pl.ReplicaID, Machine: machine, GPUs: pl.GPUs, TEE: pl.TEE, Note: pl.Note})
		if nm, ok := byBin[machine]; ok {
			nm.Replicas = append(nm.Replicas, pl.ReplicaID)
		}
	}
	// A fleet's launch places tens of thousands a plan: sorted without
	// reflection.
	slices.SortFunc(plan.Placements, func(a, b ReplicaPlacement) int { return strings.Compare(a.Replica, b.Replica) })
	plan.Pending = make([]PendingReplica, 0, len(res.Unplaced))
	for id, why := range res.Unplaced {
		plan.Pending = append(plan.Pending, PendingReplica{Replica: id, Reason: why})
	}
	slices.SortFunc(plan.Pending, func(a, b PendingReplica) int { return strings.Compare(a.Replica, b.Replica) })
}

// bound sets the plan's lower bound and its gap.
func (p *planning) bound(plan *Plan) {
	plan.LowerBound = p.lowerBound(plan)
	if plan.LowerBound > 0 {
		plan.Gap = plan.NewCapacityCost/plan.LowerBound - 1
	}
}
