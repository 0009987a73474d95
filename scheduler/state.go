package scheduler

import (
	"cmp"
	"slices"
	"strings"

	"github.com/gantry-dev/gantry/api"
)

// state is one pass: machines in placement order (fullest first, then by
// id), with each machine's position in that order.
type state struct {
	order     []*Machine
	byCluster map[string][]*Machine
	teeInClus map[string]bool
	// labels are the labels of each service seen (residents' and
	// pending replicas'), for affinity selectors.
	labels map[string]map[string]string
	// anti are each service's required anti-affinity terms.
	anti map[string][]api.AffinityTerm
	// shunned are shunnedBy's answers by service, until learn changes
	// labels or anti; labelsEpoch counts those changes.
	shunned     map[string][]shunned
	labelsEpoch int
	// sets are the machines each static need may use (see staticKey).
	sets map[string]*eligibleSet
	// hosts are, per service, machines that run or ran a replica of it in
	// this pass (entries whose count fell to 0 are left; readers check).
	hosts map[string]*hostList
	// terse: unplaced replicas get no explanation (what-if passes).
	terse bool
	// accepts, when set, says whether a replica may go on the machine
	// picked for it: one refused is left unplaced, and its class's
	// placement stops (PlaceAllOn).
	accepts func(*Machine) bool
	// walked counts the machines first-fit walks looked at instead of a
	// fit index (indexedOrScan); past len(order) they use the index.
	walked int
	// explained are the explanations given in a Place call since its last
	// placement, by shape (explainOnce).
	explained map[explainKey]string
	// noPreempt: no replica evicts a resident (NoPreempting).
	noPreempt bool
	// reuse, when set, holds the lists what-ifs return (ReuseWhatIfs).
	reuse *whatIfLists
}

// whatIfLists are the lists a session reuses for its what-ifs' results.
type whatIfLists struct {
	placements []Placement
	unplaced   map[string]string
}

// whatIfResult is an empty result for a what-if: in the session's lists
// when it reuses them.
func (st *state) whatIfResult() Result {
	if st.reuse == nil {
		return Result{Unplaced: map[string]string{}}
	}
	clear(st.reuse.unplaced)
	return Result{Placements: st.reuse.placements[:0], Unplaced: st.reuse.unplaced}
}

// keepWhatIfResult keeps the list a what-if's result grew, for the next.
func (st *state) keepWhatIfResult(res Result) {
	if st.reuse != nil {
		st.reuse.placements = res.Placements[:0]
	}
}

type scored struct {
	m     *Machine
	score float64
	// at is the machine's position in the session's input.
	at int
}

func newState(machines []*Machine, scratch *Scratch) *state {
	byScore, order := scratch.lists(len(machines))
	for i, m := range machines {
		byScore[i] = scored{m, packScore(m), i}
	}
	if slices.IsSortedFunc(machines, byMachineID) {
		// Ties (machines as full as each other: many in a packed fleet)
		// go by position, which is by id, without reading each machine's
		// id again at every comparison.
		tmp, keys := scratch.sortLists(len(byScore))
		sortByScore(byScore, tmp, keys)
	} else {
		slices.SortFunc(byScore, func(a, b scored) int {
			return cmp.Or(cmp.Compare(b.score, a.score), strings.Compare(a.m.ID, b.m.ID))
		})
	}
	st := &state{order: order, byCluster: map[string][]*Machine{}, teeInClus: map[string]bool{}, labels: map[string]map[string]string{},
		anti: map[string][]api.AffinityTerm{}, shunned: map[string][]shunned{}, sets: map[string]*eligibleSet{}}
	// Residents share their rules by revision: each rules is learnt once
	// (a map by pointer, not two by service name for each of 500,000),
	// and rules without labels or terms teach nothing.
	learnt := map[*Rules]bool{}
	clusters := clusterLists{at: map[string]int{}}
	// Most fleets are one cluster: its list is the order itself (clipped:
	// a machine opened later is appended to a copy).
	oneCluster := len(machines) > 0 && !slices.ContainsFunc(machines, func(m *Machine) bool { return m.Cluster != machines[0].Cluster })
	// Each machine's places in the indexes, two each in one allocation (a
	// third, in a pass with many apart classes, grows its own).
	slots := make([]slot, 2*len(byScore))
	for i, s := range byScore {
		order[i] = s.m
		s.m.rank, s.m.slots = i, slots[2*i:2*i:2*i+2]
		for _, res := range s.m.Residents[min(s.m.PlainResidents, len(s.m.Residents)):] {
			if rules := res.Replica.Rules; res.Replica.Teaches() && !learnt[rules] {
				learnt[rules] = true
				st.learn(res.Replica)
			}
		}
		if !oneCluster {
			clusters.add(s.m)
		}
		if s.m.TEE {
			st.teeInClus[s.m.Cluster] = true
		}
	}
	for _, l := range clusters.lists {
		st.byCluster[l.name] = l.machines
	}
	if oneCluster {
		st.byCluster[machines[0].Cluster] = slices.Clip(order)
	}
	return st
}

func byMachineID(a, b *Machine) int { return strings.Compare(a.ID, b.ID) }

// clusterLists are machines by cluster, in the order added. A fleet has
// few clusters: finding one's list by comparing names (equal ones mostly
// the same string) is quicker than hashing a name for each of 50,000
// machines; past a few, a map finds it.
type clusterLists struct {
	lists []clusterList
	at    map[string]int
}

type clusterList struct {
	name     string
	machines []*Machine
}

const clustersCompared = 8

func (c *clusterLists) add(m *Machine) {
	i, ok := -1, false
	if len(c.lists) <= clustersCompared {
		for j := range c.lists {
			if c.lists[j].name == m.Cluster {
				i, ok = j, true
				break
			}
		}
	} else {
		i, ok = c.at[m.Cluster]
	}
	if !ok {
		i = len(c.lists)
		c.lists = append(c.lists, clusterList{name: m.Cluster})
		c.at[m.Cluster] = i
	}
	c.lists[i].machines = append(c.lists[i].machines, m)
}

// tier is a set of machines tried in turn, and how replicas run there.
type tier struct {
	machines []*Machine
	accepts  func(*Machine) bool
	withGPU  bool
	tee      bool
	note     string
	// whole: the tier is every machine the class may use, so pickers may
	// search the shared fit index instead of the list.
	whole bool
}

// add records a machine opened during the pass.
func (st *state) add(m *Machine) {
	m.rank, m.slots = len(st.order), nil
	st.order = append(st.order, m)
	st.byCluster[m.Cluster] = append(st.byCluster[m.Cluster], m)
	if m.TEE {
		st.teeInClus[m.Cluster] = true
	}
	for _, set := range st.sets {
		if staticFit(m, &set.sample) == "" {
			set.add(m)
		}
	}
	if st.hosts != nil {
		for svc := range m.ServiceCount {
			st.noteHost(svc, m)
		}
	}
}

// book assigns a replica and keeps the service's hosts current.
func (st *state) book(m *Machine, r *Replica, gpus []int) {
	if st.hosts != nil {
		st.noteHost(r.Service, m)
	}
	st.explained = nil // the machines' room changed
	Assign(m, *r, gpus)
}

// hostList is the machines that ran a service in the pass, each once.
type hostList struct {
	machines []*Machine
	listed   map[*Machine]bool
}

// hostsOf are the machines running the service, in the order they were
// first seen running it.
func (st *state) hostsOf(service string) []*Machine {
	if st.hosts == nil {
		st.hosts = map[string]*hostList{}
		for _, m := range st.order {
			for svc := range m.ServiceCount {
				st.noteHost(svc, m)
			}
		}
	}
	l := st.hosts[service]
	if l == nil {
		return nil
	}
	out := make([]*Machine, 0, len(l.machines))
	for _, m := range l.machines {
		if m.ServiceCount[service] > 0 {
			out = append(out, m)
		}
	}
	return out
}

func (st *state) noteHost(service string, m *Machine) {
	l := st.hosts[service]
	if l == nil {
		l = &hostList{listed: map[*Machine]bool{}}
		st.hosts[service] = l
	}
	if !l.listed[m] {
		l.listed[m] = true
		l.machines = append(l.machines, m)
	}
}

func (st *state) placeClass(cl *class, res *Result, open Opener) {
	r := cl.replicas[0]
	if r.Isolation == api.IsolationTEERequired && !st.teeInClus[r.Cluster] && open == nil {
		for _, rep := range cl.replicas {
			res.Unplaced[rep.ID] = "no TEE runtime in cluster " + r.Cluster + " (isolation teeRequired: prerequisite missing)"
		}
		return
	}
	set := st.eligibleFor(&r)
	eligible := slices.Clip(set.machines) // pickers that append get their own copy
	zone := ""
	if r.SameZone {
		zone = st.sameZoneChoice(&r, eligible)
		if zone != "" { // the zone's fit index lists its machines: no walk of every machine a class
			eligible = slices.Clip(set.index(zone).machines)
		} else {
			eligible = inZone(eligible, zone)
		}
	}
	tiers := tiersFor(&r, eligible)
	pickers := make([]picker, len(tiers))
	for i, t := range tiers {
		pickers[i] = st.pickerFor(&r, t, eligible, set, zone, len(cl.replicas))
	}
	// stuck is why the class's last replica found no machine, while
	// nothing was booked or added since: the next of the class (the same
	// service, requests and constraints) finds none either, for the same
	// reason, without a walk of every machine again.
	stuck := ""
	for i := range cl.replicas {
		// A pointer into the class, not a copy: a copy handed through the
		// pickers' interface and the opener escapes, one allocation a
		// replica. Nothing below changes a replica or keeps it.
		rep := &cl.replicas[i]
		preempts := rep.Preempt && !st.noPreempt
		if stuck != "" && open == nil && !preempts {
			res.Unplaced[rep.ID] = stuck
			continue
		}
		m, gpus, t, ok := pickIn(tiers, pickers, rep)
		if !ok && open != nil {
			hint := zone
			if hint == "" {
				hint = zoneHint(pickers, rep)
			}
			fresh, why := open(rep, hint)
			if fresh == nil {
				res.Unplaced[rep.ID] = st.unplacedWhy(rep, zone, why)
				continue
			}
			st.add(fresh)
			if r.SameZone && zone == "" {
				zone = fresh.Zone
			}
			for k := range tiers {
				if staticFit(fresh, &r) == "" && (zone == "" || fresh.Zone == zone) && tiers[k].accepts(fresh) {
					pickers[k].add(fresh)
					break
				}
			}
			m, gpus, t, ok = pickIn(tiers, pickers, rep)
		}
		if !ok && preempts && open == nil {
			m, gpus, t, ok = st.preempt(eligible, tiers, rep, res)
		}
		if !ok {
			if open == nil {
				stuck = st.explainOnce(rep, zone)
			} else {
				stuck = st.explain(rep, zone)
			}
			res.Unplaced[rep.ID] = stuck
			continue
		}
		if st.accepts != nil && !st.accepts(m) {
			res.Unplaced[rep.ID] = "refused by the caller"
			return
		}
		stuck = ""
		st.book(m, rep, gpus)
		if len(res.Placements) == cap(res.Placements) { // room for the rest of the class: thousands are not placed by doubling
			res.Placements = slices.Grow(res.Placements, len(cl.replicas)-i)
		}
		res.Placements = append(res.Placements, Placement{ReplicaID: rep.ID, MachineID: m.ID, GPUs: gpus, TEE: t.tee, Note: t.note})
	}
}

// unplacedWhy says why a replica waits when no machine takes it and none
// can be opened for it (openWhy). It is unschedulable (the reason begins
// with api.ReasonUnschedulable) when no new machine would ever hold it
// and no machine of the cluster would either, were it empty.
func (st *state) unplacedWhy(r *Replica, zone, openWhy string) string {
	opened, never := strings.CutPrefix(openWhy, api.ReasonUnschedulable)
	why := st.explain(r, zone) + "; " + opened
	if !never {
		return why
	}
	for _, m := range st.byCluster[r.Cluster] {
		if staticFit(m, r) == "" && m.Allocatable.Fits(r.Requests) {
			return why // it may hold the replica once it has room
		}
	}
	return api.ReasonUnschedulable + why
}

// explainKey is what explain reads of a replica without spread,
// affinity or dedication: its eligible machines (its static needs), the
// zone it must be in, its requests and GPU need.
type explainKey struct {
	set      *eligibleSet
	zone     string
	requests api.Resources
	gpu      GPUNeed
	withGPU  bool
}

// explainOnce is explain, walking the machines once for each shape of
// replica between placements: the classes of services alike (one after
// another, each finding the same machines full) are told alike, not each
// after a walk of every machine (at 10,000 machines, 40 services waiting
// for machines on their way were 40 walks a pass). Only within a Place
// call without an opener, whose machines change by its placements and
// evictions alone (each clears what was explained).
func (st *state) explainOnce(r *Replica, zone string) string {
	if st.terse || len(r.Spread) > 0 || r.Dedicated || st.hasAffinity(r) {
		return st.explain(r, zone)
	}
	key := explainKey{set: st.eligibleFor(r), zone: zone, requests: r.Requests}
	if r.GPU != nil {
		key.gpu, key.withGPU = *r.GPU, true
	}
	if why, ok := st.explained[key]; ok {
		return why
	}
	why := st.explain(r, zone)
	if st.explained == nil {
		st.explained = map[explainKey]string{}
	}
	st.explained[key] = why
	return why
}

// explain says why no machine of the cluster takes the replica, the way
// Kubernetes does: "0/3 machines fit: 2 insufficient cpu, 1 no docker
// runtime". It walks every machine, so it runs only for a replica left
// unplaced.
func (st *state) explain(r *Replica, zone string) string {
	if st.terse {
		return "fits nowhere"
	}
	machines, eligible := st.byCluster[r.Cluster], st.eligibleFor(r).machines
	tally := missTally{total: len(machines)}
	rules := newSpreadRules(eligible, r)
	var aff *affinity
	if st.hasAffinity(r) {
		aff = st.affinityOf(r)
	}
	withGPU := r.GPU != nil && !r.GPU.Preferred
	// The eligible are the cluster's machines that pass the static checks:
	// when they are all of them, none is checked again (10,000 machines
	// for each class explained).
	allEligible := len(eligible) == len(machines)
	for _, m := range machines {
		why := ""
		if !allEligible {
			why = staticFit(m, r)
		}
		if why == "" && zone != "" && m.Zone != zone {
			why = "sameZone: service runs in zone " + zone
		}
		if why == "" {
			why, _ = dynamicFit(m, r, withGPU)
		}
		if why == "" {
			why = rules.violation(m)
		}
		if why == "" && aff != nil {
			why = aff.violation(m)
		}
		if why != "" {
			tally.add(why)
		}
	}
	return tally.reason()
}

func pickIn(tiers []tier, pickers []picker, r *Replica) (*Machine, []int, tier, bool) {
	for i, t := range tiers {
		if m, gpus := pickers[i].pick(r); m != nil {
			pickers[i].placed(m)
			return m, gpus, t, true
		}
	}
	return nil, nil, tier{}, false
}

// zoneHint asks a zone-spread picker which zone needs a replica next, or
// the affinity terms which zone a new machine must be in.
func zoneHint(pickers []picker, r *Replica) string {
	for _, p := range pickers {
		switch p := p.(type) {
		case *zoneSpread:
			return p.leastLoaded()
		case *scan:
			if p.st.hasAffinity(r) {
				return p.st.affinityOf(r).zoneHint(r.ZoneDomains)
			}
		}
	}
	return ""
}

// tiersFor splits eligible machines by preference: TEE machines first for
// teePreferred, GPU machines first for a preferred GPU.
func tiersFor(r *Replica, eligible []*Machine) []tier {
	all := func(*Machine) bool { return true }
	teeTiers := []tier{{machines: eligible, accepts: all, tee: r.Isolation == api.IsolationTEERequired, whole: true}}
	if r.Isolation == api.IsolationTEEPreferred {
		isTEE := func(m *Machine) bool { return m.TEE }
		notTEE := func(m *Machine) bool { return !m.TEE }
		teeTiers = []tier{
			{machines: filter(eligible, isTEE), accepts: isTEE, tee: true},
			{machines: filter(eligible, notTEE), accepts: notTEE, note: "no TEE capacity: running on the standard runtime (isolation teePreferred)"},
		}
	}
	if r.GPU != nil && r.GPU.Preferred {
		for i := range teeTiers {
			teeTiers[i].whole = false
		}
	}
	if r.GPU == nil {
		return teeTiers
	}
	if !r.GPU.Preferred {
		for i := range teeTiers {
			teeTiers[i].withGPU = true
		}
		return teeTiers
	}
	hasGPUs := func(m *Machine) bool { return matchingGPUs(m, r.GPU, false) >= r.GPU.Count }
	var out []tier
	for _, t := range teeTiers {
		inTier := t.accepts
		out = append(out, tier{machines: filter(t.machines, hasGPUs), accepts: func(m *Machine) bool { return inTier(m) && hasGPUs(m) },
			withGPU: true, tee: t.tee, note: t.note})
		note := "no free matching GPU: running without GPUs (gpu policy preferred)"
		if t.note != "" {
			note = t.note + "; " + note
		}
		// Without GPUs, any machine of the tier will do; machines without
		// GPUs first, to keep GPUs for replicas that use them.
		noGPUs := filter(t.machines, func(m *Machine) bool { return len(m.GPUs) == 0 })
		withAny := filter(t.machines, func(m *Machine) bool { return len(m.GPUs) > 0 })
		out = append(out, tier{machines: append(noGPUs, withAny...), accepts: inTier, tee: t.tee, note: note})
	}
	return out
}

func filter(ms []*Machine, pred func(*Machine) bool) []*Machine {
	var out []*Machine
	for _, m := range ms {
		if pred(m) {
			out = append(out, m)
		}
	}
	return out
}

// sameZoneChoice is the zone the service already runs in (the one with
// most replicas), else the zone with the most free CPU. The service's
// hosts settle it without a walk over every machine when one zone leads.
func (st *state) sameZoneChoice(r *Replica, eligible []*Machine) string {
	running := map[string]int{}
	for _, m := range st.hostsOf(r.Service) {
		if staticFit(m, r) == "" {
			running[m.Zone] += m.ServiceCount[r.Service]
		}
	}
	lead, leaders := "", 0
	for z, n := range running {
		switch {
		case lead == "" || n > running[lead]:
			lead, leaders = z, 1
		case n == running[lead]:
			leaders++
		}
	}
	if leaders == 1 {
		return lead
	}
	return sameZoneByScan(eligible, r.Service)
}

func sameZoneByScan(eligible []*Machine, service string) string {
	running := map[string]int{}
	free := map[string]int64{}
	for _, m := range eligible {
		running[m.Zone] += m.ServiceCount[service]
		free[m.Zone] += m.Free().MilliCPU
	}
	best := ""
	for z := range free {
		if best == "" || running[z] > running[best] || (running[z] == running[best] && (free[z] > free[best] || (free[z] == free[best] && z < best))) {
			best = z
		}
	}
	return best
}

func inZone(ms []*Machine, zone string) []*Machine {
	var out []*Machine
	for _, m := range ms {
		if m.Zone == zone {
			out = append(out, m)
		}
	}
	return out
}
