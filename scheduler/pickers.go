package scheduler

import (
	"container/heap"
	"fmt"
	"sort"

	"github.com/gantry-dev/gantry/api"
)

// picker chooses a machine for each replica of one class within one tier.
type picker interface {
	pick(r *Replica) (*Machine, []int)
	placed(m *Machine)
	// add takes a machine opened during the pass.
	add(m *Machine)
}

func (st *state) pickerFor(r *Replica, t tier, eligible []*Machine, set *eligibleSet, zone string, classSize int) picker {
	binpack := r.Scoring == "" || r.Scoring == api.ScoringBinpack
	// The shared fit index covers the class's machines when the tier is
	// all of them and a sameZone zone (if any) is known.
	indexed := t.whole && (!r.SameZone || zone != "")
	var keepApart apart
	var isApart bool
	if indexed && len(r.Spread) == 0 && binpack {
		keepApart, isApart = st.apartOnMachines(r)
	}
	switch {
	case isApart && keepApart.selfOnly:
		// Its own service's replicas block few machines: skipping them
		// costs less than an index of its own for each such service.
		return st.indexedOrScan(set, zone, t.withGPU, keepApart.blocked)
	case isApart:
		return &indexedFit{index: set.apartIndex(zone, keepApart, st.labelsEpoch), withGPU: t.withGPU, skip: keepApart.blocked}
	case st.hasAffinity(r):
		// Affinity counts change with every replica placed: the general picker.
	case len(r.Spread) == 0 && binpack && indexed:
		return st.indexedOrScan(set, zone, t.withGPU, nil)
	case len(r.Spread) == 0 && binpack:
		return &firstFit{machines: t.machines, withGPU: t.withGPU}
	case len(r.Spread) == 1 && binpack && r.Spread[0].Key == api.SpreadMachine:
		if indexed {
			if p := st.newSparseSpread(r, set, zone, classSize); p != nil {
				return p
			}
		}
		return newMachineSpread(r, t, eligible)
	case len(r.Spread) == 1 && binpack && r.Spread[0].Key == api.SpreadZone:
		if indexed && zone == "" {
			return st.newIndexedZoneSpread(r, t, set)
		}
		return newZoneSpread(r, t, eligible)
	}
	return &scan{st: st, tier: t, eligible: eligible, spreadScoring: !binpack}
}

// firstFit walks machines fullest-first; a machine that cannot take this
// class's replica is skipped for the rest of the pass.
type firstFit struct {
	machines []*Machine
	pos      int
	withGPU  bool
}

func (p *firstFit) pick(r *Replica) (*Machine, []int) {
	for p.pos < len(p.machines) {
		m := p.machines[p.pos]
		if why, gpus := dynamicFit(m, r, p.withGPU); why == "" {
			return m, gpus
		}
		p.pos++
	}
	return nil, nil
}

func (p *firstFit) placed(*Machine) {}

func (p *firstFit) add(m *Machine) { p.machines = append(p.machines, m) }

// indexedFit is firstFit over a shared fit index: the search skips ranges
// of machines without room in one step.
type indexedFit struct {
	index   *fitIndex
	pos     int
	withGPU bool
	// skip rejects a machine the index found (sparse spread's rule).
	skip func(*Machine) bool
}

func (p *indexedFit) pick(r *Replica) (*Machine, []int) {
	for {
		i := p.index.first(p.pos, r.Requests)
		if i < 0 {
			p.pos = len(p.index.machines)
			return nil, nil
		}
		m := p.index.machines[i]
		if p.skip == nil || !p.skip(m) {
			if why, gpus := dynamicFit(m, r, p.withGPU); why == "" {
				p.pos = i
				return m, gpus
			}
		}
		p.pos = i + 1
	}
}

func (p *indexedFit) placed(*Machine) {}

// add: opened machines reach the shared index through state.add.
func (p *indexedFit) add(*Machine) {}

// indexedOrScan is first fit over the set's machines (or those in zone),
// through the set's shared fit index, or, while the index over all of
// them is not built and the session has walked fewer machines than it
// has, by walking them: a pass that places one replica among 50,000
// machines built the index (every machine added, a tree over them) to
// find one. A walk that runs past the session's budget builds the index
// and goes on through it, so a session walks at most once more than
// building the index would.
func (st *state) indexedOrScan(set *eligibleSet, zone string, withGPU bool, skip func(*Machine) bool) picker {
	if zone != "" || set.all != nil || st.walked >= len(st.order) {
		return &indexedFit{index: set.index(zone), withGPU: withGPU, skip: skip}
	}
	return &scanFit{st: st, set: set, withGPU: withGPU, skip: skip}
}

// scanFit is indexedFit over all of a set's machines, walking them until
// the session's budget runs out.
type scanFit struct {
	st      *state
	set     *eligibleSet
	pos     int
	withGPU bool
	skip    func(*Machine) bool
	indexed *indexedFit // once the budget ran out
}

func (p *scanFit) pick(r *Replica) (*Machine, []int) {
	if p.indexed != nil {
		return p.indexed.pick(r)
	}
	for ; p.pos < len(p.set.machines); p.pos++ {
		if p.st.walked++; p.st.walked > len(p.st.order) {
			p.indexed = &indexedFit{index: p.set.index(""), pos: p.pos, withGPU: p.withGPU, skip: p.skip}
			return p.indexed.pick(r)
		}
		m := p.set.machines[p.pos]
		if p.skip != nil && p.skip(m) {
			continue
		}
		if why, gpus := dynamicFit(m, r, p.withGPU); why == "" {
			return m, gpus
		}
	}
	return nil, nil
}

func (p *scanFit) placed(*Machine) {}

// add: opened machines reach the set (and its index) through state.add.
func (p *scanFit) add(*Machine) {}

// sparseSpread is machine spread when the service runs on fewer machines
// than the class may use, so the least-loaded count stays 0 for the whole
// class: machines without the service first (first fit over the shared
// index), then, as maxSkew allows, the few that run 1, 2, … replicas.
type sparseSpread struct {
	service string
	maxSkew int
	empty   indexedFit
	hosts   []*Machine
	withGPU bool
}

func (st *state) newSparseSpread(r *Replica, set *eligibleSet, zone string, classSize int) *sparseSpread {
	var hosts []*Machine
	for _, m := range st.hostsOf(r.Service) {
		if staticFit(m, r) == "" && (zone == "" || m.Zone == zone) {
			hosts = append(hosts, m)
		}
	}
	idx := set.index(zone)
	if len(hosts)+classSize >= len(idx.machines) {
		return nil
	}
	sort.Slice(hosts, func(i, j int) bool { return hosts[i].rank < hosts[j].rank }) // fullest first at each level
	svc := r.Service
	return &sparseSpread{service: svc, maxSkew: r.Spread[0].MaxSkew, hosts: hosts, withGPU: r.GPU != nil && !r.GPU.Preferred,
		empty: indexedFit{index: idx, withGPU: r.GPU != nil && !r.GPU.Preferred, skip: func(m *Machine) bool { return m.ServiceCount[svc] > 0 }}}
}

func (p *sparseSpread) pick(r *Replica) (*Machine, []int) {
	if m, gpus := p.empty.pick(r); m != nil {
		return m, gpus
	}
	for level := 1; level < p.maxSkew; level++ { // count+1-0 ≤ maxSkew
		for _, m := range p.hosts {
			if m.ServiceCount[p.service] != level {
				continue
			}
			if why, gpus := dynamicFit(m, r, p.withGPU); why == "" {
				return m, gpus
			}
		}
	}
	return nil, nil
}

func (p *sparseSpread) placed(m *Machine) {
	if m.ServiceCount[p.service] == 0 { // booked after placed: it now hosts one
		p.hosts = append(p.hosts, m)
		sort.Slice(p.hosts, func(i, j int) bool { return p.hosts[i].rank < p.hosts[j].rank })
	}
}

func (p *sparseSpread) add(*Machine) {}

// machineSpread keeps the least-loaded machines (for this service) on top
// of a heap, fullest first among equals.
type machineSpread struct {
	service string
	h       spreadHeap
	hist    []int // machines per replica count
	min     int
	maxSkew int
	withGPU bool
}

type spreadItem struct {
	m     *Machine
	count int
	rank  int
}

type spreadHeap []*spreadItem

func (h spreadHeap) Len() int { return len(h) }
func (h spreadHeap) Less(i, j int) bool {
	if h[i].count != h[j].count {
		return h[i].count < h[j].count
	}
	return h[i].rank < h[j].rank
}
func (h spreadHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *spreadHeap) Push(x any)   { *h = append(*h, x.(*spreadItem)) }
func (h *spreadHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

func newMachineSpread(r *Replica, t tier, eligible []*Machine) *machineSpread {
	p := &machineSpread{service: r.Service, maxSkew: r.Spread[0].MaxSkew, withGPU: t.withGPU, min: -1}
	items := make([]spreadItem, len(t.machines))
	p.h = make(spreadHeap, len(t.machines))
	for i, m := range t.machines {
		items[i] = spreadItem{m: m, count: m.ServiceCount[r.Service], rank: m.rank}
		p.h[i] = &items[i]
	}
	heap.Init(&p.h)
	for _, m := range eligible { // every eligible machine is a domain, full or not
		p.count(m.ServiceCount[r.Service], 1)
	}
	return p
}

// count moves n machines into the bucket of c replicas.
func (p *machineSpread) count(c, n int) {
	for len(p.hist) <= c {
		p.hist = append(p.hist, 0)
	}
	p.hist[c] += n
	if p.min < 0 || (n > 0 && c < p.min) {
		p.min = c
	}
}

func (p *machineSpread) pick(r *Replica) (*Machine, []int) {
	for p.h.Len() > 0 {
		top := p.h[0]
		if why, gpus := dynamicFit(top.m, r, p.withGPU); why != "" {
			heap.Pop(&p.h)
			continue
		} else if top.count+1-p.min > p.maxSkew {
			return nil, nil
		} else {
			return top.m, gpus
		}
	}
	return nil, nil
}

func (p *machineSpread) add(m *Machine) {
	c := m.ServiceCount[p.service]
	p.count(c, 1)
	heap.Push(&p.h, &spreadItem{m: m, count: c, rank: m.rank})
}

func (p *machineSpread) placed(m *Machine) {
	top := p.h[0]
	p.count(top.count, -1)
	top.count++
	p.count(top.count, 1)
	for p.hist[p.min] == 0 {
		p.min++
	}
	heap.Fix(&p.h, 0)
}

// zoneSpread tries zones least-loaded first, and within a zone machines
// fullest first.
type zoneSpread struct {
	withGPU bool
	zones   []string
	counts  map[string]int
	lists   map[string]picker
	maxSkew int
	// inZone makes the picker of a zone first seen on an opened machine
	// (nil: the zone's list picker).
	inZone func(zone string) picker
}

func newZoneSpread(r *Replica, t tier, eligible []*Machine) *zoneSpread {
	p := &zoneSpread{withGPU: t.withGPU, counts: map[string]int{}, lists: map[string]picker{}, maxSkew: r.Spread[0].MaxSkew}
	for _, z := range r.ZoneDomains {
		p.counts[z] += 0
	}
	for _, m := range eligible {
		p.counts[m.Zone] += m.ServiceCount[r.Service]
	}
	for _, m := range t.machines {
		l, ok := p.lists[m.Zone]
		if !ok {
			l = &firstFit{withGPU: t.withGPU}
			p.lists[m.Zone] = l
		}
		l.add(m)
	}
	for z := range p.counts {
		p.zones = append(p.zones, z)
	}
	return p
}

// newIndexedZoneSpread counts the service's replicas per zone from its
// hosts and searches each zone's shared fit index.
func (st *state) newIndexedZoneSpread(r *Replica, t tier, set *eligibleSet) *zoneSpread {
	p := &zoneSpread{withGPU: t.withGPU, counts: map[string]int{}, lists: map[string]picker{}, maxSkew: r.Spread[0].MaxSkew}
	p.inZone = func(zone string) picker { return &indexedFit{index: set.index(zone), withGPU: t.withGPU} }
	for _, z := range r.ZoneDomains {
		p.counts[z] += 0
	}
	for _, z := range set.zoneList {
		p.counts[z] += 0
		p.lists[z] = p.inZone(z)
	}
	for _, m := range st.hostsOf(r.Service) {
		if staticFit(m, r) == "" {
			p.counts[m.Zone] += m.ServiceCount[r.Service]
		}
	}
	for z := range p.counts {
		p.zones = append(p.zones, z)
	}
	return p
}

func (p *zoneSpread) pick(r *Replica) (*Machine, []int) {
	sort.Slice(p.zones, func(i, j int) bool {
		ci, cj := p.counts[p.zones[i]], p.counts[p.zones[j]]
		if ci != cj {
			return ci < cj
		}
		return p.zones[i] < p.zones[j]
	})
	if len(p.zones) == 0 {
		return nil, nil
	}
	lowest := p.counts[p.zones[0]]
	for _, z := range p.zones {
		if p.counts[z]+1-lowest > p.maxSkew {
			return nil, nil
		}
		if l, ok := p.lists[z]; ok {
			if m, gpus := l.pick(r); m != nil {
				return m, gpus
			}
		}
	}
	return nil, nil
}

func (p *zoneSpread) placed(m *Machine) { p.counts[m.Zone]++ }

func (p *zoneSpread) add(m *Machine) {
	if _, ok := p.counts[m.Zone]; !ok {
		p.counts[m.Zone] = 0
		p.zones = append(p.zones, m.Zone)
	}
	l, ok := p.lists[m.Zone]
	if !ok {
		if p.inZone != nil {
			p.lists[m.Zone] = p.inZone(m.Zone) // the index has the machine already
			return
		}
		l = &firstFit{withGPU: p.withGPU}
		p.lists[m.Zone] = l
	}
	l.add(m)
}

// leastLoaded is the zone the next replica should go to.
func (p *zoneSpread) leastLoaded() string {
	best := ""
	for _, z := range p.zones {
		if best == "" || p.counts[z] < p.counts[best] || (p.counts[z] == p.counts[best] && z < best) {
			best = z
		}
	}
	return best
}

// scan is the general picker: every machine of the tier, every rule.
type scan struct {
	st            *state
	tier          tier
	eligible      []*Machine
	spreadScoring bool
}

func (p *scan) pick(r *Replica) (*Machine, []int) {
	rules := newSpreadRules(p.eligible, r)
	var aff *affinity
	if p.st.hasAffinity(r) {
		aff = p.st.affinityOf(r)
	}
	var best *Machine
	var bestGPUs []int
	bestScore := 0.0
	for _, m := range p.tier.machines {
		why, gpus := dynamicFit(m, r, p.tier.withGPU)
		if why == "" {
			why = rules.violation(m)
		}
		if why == "" && aff != nil {
			why = aff.violation(m)
		}
		if why != "" {
			continue
		}
		score := packScore(m)
		if p.spreadScoring {
			score = -score
		}
		if aff != nil {
			score += 10 * float64(aff.preference(m)) // a preference outweighs any packing difference
		}
		if best == nil || score > bestScore {
			best, bestGPUs, bestScore = m, gpus, score
		}
	}
	return best, bestGPUs
}

func (p *scan) placed(*Machine) {}

func (p *scan) add(m *Machine) {
	p.tier.machines = append(p.tier.machines, m)
	p.eligible = append(p.eligible, m)
}

// spreadRules holds per-rule domain counts over the eligible machines.
type spreadRules struct {
	rules  []api.SpreadRule
	counts []map[string]int
	mins   []int
}

func newSpreadRules(eligible []*Machine, r *Replica) spreadRules {
	sr := spreadRules{rules: r.Spread}
	for _, rule := range r.Spread {
		counts := map[string]int{}
		if rule.Key == api.SpreadZone {
			for _, z := range r.ZoneDomains {
				counts[z] += 0
			}
		}
		for _, m := range eligible {
			counts[domain(m, rule.Key)] += m.ServiceCount[r.Service]
		}
		lowest := -1
		for _, n := range counts {
			if lowest < 0 || n < lowest {
				lowest = n
			}
		}
		sr.counts = append(sr.counts, counts)
		sr.mins = append(sr.mins, max(lowest, 0))
	}
	return sr
}

func (sr spreadRules) violation(m *Machine) string {
	for i, rule := range sr.rules {
		if sr.counts[i][domain(m, rule.Key)]+1-sr.mins[i] > rule.MaxSkew {
			return fmt.Sprintf("%s spread maxSkew %d", rule.Key, rule.MaxSkew)
		}
	}
	return ""
}

func domain(m *Machine, key string) string {
	if key == api.SpreadZone {
		return m.Zone
	}
	return m.ID
}
