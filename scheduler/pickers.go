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
}

func (st *state) pickerFor(r *Replica, t tier, eligible []*Machine, tally *missTally) picker {
	binpack := r.Scoring == "" || r.Scoring == api.ScoringBinpack
	switch {
	case len(r.Spread) == 0 && binpack:
		return &firstFit{machines: t.machines, withGPU: t.withGPU, tally: tally}
	case len(r.Spread) == 1 && binpack && r.Spread[0].Key == api.SpreadMachine:
		return newMachineSpread(st, r, t, eligible, tally)
	case len(r.Spread) == 1 && binpack && r.Spread[0].Key == api.SpreadZone:
		return newZoneSpread(r, t, eligible, tally)
	}
	return &scan{st: st, tier: t, eligible: eligible, tally: tally, spreadScoring: !binpack}
}

// firstFit walks machines fullest-first; a machine that cannot take this
// class's replica is skipped for the rest of the pass.
type firstFit struct {
	machines []*Machine
	pos      int
	withGPU  bool
	tally    *missTally
}

func (p *firstFit) pick(r *Replica) (*Machine, []int) {
	for p.pos < len(p.machines) {
		m := p.machines[p.pos]
		why, gpus := dynamicFit(m, r, p.withGPU)
		if why == "" {
			return m, gpus
		}
		p.tally.add(why)
		p.pos++
	}
	return nil, nil
}

func (p *firstFit) placed(*Machine) {}

// machineSpread keeps the least-loaded machines (for this service) on top
// of a heap, fullest first among equals.
type machineSpread struct {
	h       spreadHeap
	hist    map[int]int
	min     int
	maxSkew int
	withGPU bool
	tally   *missTally
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

func newMachineSpread(st *state, r *Replica, t tier, eligible []*Machine, tally *missTally) *machineSpread {
	p := &machineSpread{hist: map[int]int{}, maxSkew: r.Spread[0].MaxSkew, withGPU: t.withGPU, tally: tally}
	for _, m := range t.machines {
		p.h = append(p.h, &spreadItem{m: m, count: m.ServiceCount[r.Service], rank: st.rank[m]})
	}
	heap.Init(&p.h)
	p.min = -1
	for _, m := range eligible { // every eligible machine is a domain, full or not
		c := m.ServiceCount[r.Service]
		p.hist[c]++
		if p.min < 0 || c < p.min {
			p.min = c
		}
	}
	return p
}

func (p *machineSpread) pick(r *Replica) (*Machine, []int) {
	for p.h.Len() > 0 {
		top := p.h[0]
		if why, gpus := dynamicFit(top.m, r, p.withGPU); why != "" {
			p.tally.add(why)
			heap.Pop(&p.h)
			continue
		} else if top.count+1-p.min > p.maxSkew {
			p.tally.add(fmt.Sprintf("machine spread maxSkew %d", p.maxSkew))
			return nil, nil
		} else {
			return top.m, gpus
		}
	}
	return nil, nil
}

func (p *machineSpread) placed(m *Machine) {
	top := p.h[0]
	p.hist[top.count]--
	top.count++
	p.hist[top.count]++
	for p.hist[p.min] == 0 {
		p.min++
	}
	heap.Fix(&p.h, 0)
}

// zoneSpread tries zones least-loaded first, and within a zone machines
// fullest first.
type zoneSpread struct {
	zones   []string
	counts  map[string]int
	lists   map[string]*firstFit
	maxSkew int
	tally   *missTally
}

func newZoneSpread(r *Replica, t tier, eligible []*Machine, tally *missTally) *zoneSpread {
	p := &zoneSpread{counts: map[string]int{}, lists: map[string]*firstFit{}, maxSkew: r.Spread[0].MaxSkew, tally: tally}
	for _, z := range r.ZoneDomains {
		p.counts[z] += 0
	}
	for _, m := range eligible {
		p.counts[m.Zone] += m.ServiceCount[r.Service]
	}
	for _, m := range t.machines {
		l, ok := p.lists[m.Zone]
		if !ok {
			l = &firstFit{withGPU: t.withGPU, tally: tally}
			p.lists[m.Zone] = l
		}
		l.machines = append(l.machines, m)
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
			p.tally.add(fmt.Sprintf("zone spread maxSkew %d", p.maxSkew))
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

// scan is the general picker: every machine of the tier, every rule.
type scan struct {
	st            *state
	tier          tier
	eligible      []*Machine
	tally         *missTally
	spreadScoring bool
}

func (p *scan) pick(r *Replica) (*Machine, []int) {
	rules := newSpreadRules(p.eligible, r)
	var best *Machine
	var bestGPUs []int
	bestScore := 0.0
	for _, m := range p.tier.machines {
		why, gpus := dynamicFit(m, r, p.tier.withGPU)
		if why == "" {
			why = rules.violation(m)
		}
		if why != "" {
			p.tally.add(why)
			continue
		}
		score := packScore(m)
		if p.spreadScoring {
			score = -score
		}
		if best == nil || score > bestScore {
			best, bestGPUs, bestScore = m, gpus, score
		}
	}
	return best, bestGPUs
}

func (p *scan) placed(*Machine) {}

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
