package planner

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/scheduler"
)

// openWindows are the numbers of machines packShare keeps open to later
// replicas (older ones are closed); each is tried.
var openWindows = []int{64, 8, 512}

// packShare packs replicas on machines of one allocatable size and
// returns them as lists of indexes into rs, plus the replicas no empty
// machine holds. The replicas are first put in an order whose every
// prefix asks for CPU and memory in the proportion of the whole (a zipper
// from both ends of the list sorted by shape: memory-heavy ones while CPU
// runs ahead, CPU-heavy ones while memory does); each then goes to the
// open machine it leaves least room on (of the last openWindow opened),
// else a new one. Each machine so gets CPU
// and memory in the proportion of the demand, and none is left with one
// resource full and the other idle.
func packShare(rs []scheduler.Replica, alloc api.Resources, openWindow int) (bins [][]int, misfits []int) {
	demand := totalDemand(rs)
	dc, dm := math.Max(float64(demand.MilliCPU), 1), math.Max(float64(demand.MemoryBytes), 1)
	order := make([]int, 0, len(rs))
	for i, r := range rs {
		if alloc.Fits(r.Requests) {
			order = append(order, i)
		} else {
			misfits = append(misfits, i)
		}
	}
	order = byShape(rs, order, dc, dm)
	type open struct {
		free api.Resources
		bin  int
	}
	var window []open
	place := func(i int) {
		req := rs[i].Requests
		best, bestLeft := -1, math.Inf(1)
		for w := range window {
			if !window[w].free.Fits(req) {
				continue
			}
			rest := window[w].free.Sub(req)
			if left := float64(rest.MilliCPU)/float64(alloc.MilliCPU) + float64(rest.MemoryBytes)/float64(alloc.MemoryBytes); left < bestLeft {
				best, bestLeft = w, left
			}
		}
		if best >= 0 {
			window[best].free = window[best].free.Sub(req)
			bins[window[best].bin] = append(bins[window[best].bin], i)
			return
		}
		bins = append(bins, []int{i})
		window = append(window, open{free: alloc.Sub(req), bin: len(bins) - 1})
		if len(window) > openWindow {
			window = window[1:]
		}
	}
	var cpu, mem float64
	for lo, hi := 0, len(order)-1; lo <= hi; {
		i := order[lo]
		if cpu > mem {
			i = order[hi]
			hi--
		} else {
			lo++
		}
		cpu += float64(rs[i].Requests.MilliCPU) / dc
		mem += float64(rs[i].Requests.MemoryBytes) / dm
		place(i)
	}
	return bins, misfits
}

// shareCandidate is the offering (in zone, when set) cheapest per unit of
// the share's own demand (the larger machine among equals) whose group has room and
// whose empty machine takes the share's first replica.
func (p *planning) shareCandidate(rs []scheduler.Replica, zone string) *candidate {
	demand := totalDemand(rs)
	var best *candidate
	bestCost := math.Inf(1)
	for _, c := range p.catalog.plain[rs[0].Cluster] {
		if (zone != "" && c.offering.Zone != zone) || !p.hasRoom(c.group) || scheduler.Fits(c.empty(), rs[0]) != "" {
			continue
		}
		cost := unitCost(c.offering.PricePerHour, c.alloc, demand)
		if cost < bestCost*(1-1e-9) || (cost <= bestCost*(1+1e-9) && best != nil && c.alloc.MilliCPU > best.alloc.MilliCPU) {
			best, bestCost = c, cost
		}
	}
	return best
}

// packOnCandidate opens the machines packShare fills and books the
// replicas on them; it returns the replicas left for the ordinary opener
// (those the candidate's machine cannot hold, and those beyond the
// group's maxSize or the cluster's subnets).
func (p *planning) packOnCandidate(rs []scheduler.Replica, cand *candidate, res *scheduler.Result) []scheduler.Replica {
	var held []scheduler.Replica
	var left []scheduler.Replica
	for _, r := range rs {
		if scheduler.Fits(cand.empty(), r) == "" {
			held = append(held, r)
		} else {
			left = append(left, r)
		}
	}
	bins, misfits := packShare(held, cand.alloc, openWindows[0])
	cost := p.packCost(bins, held, cand)
	// Within 0.2% of the share's fluid cost on this offering the other
	// packings cannot win enough to pay for trying them.
	if fluid := unitCost(cand.offering.PricePerHour, cand.alloc, totalDemand(held)); cost <= 1.002*fluid {
		return p.openPacked(held, bins, misfits, left, cand, res)
	}
	for _, w := range openWindows[1:] {
		if zip, zipMisfits := packShare(held, cand.alloc, w); p.packCost(zip, held, cand) < cost {
			bins, misfits, cost = zip, zipMisfits, p.packCost(zip, held, cand)
		}
	}
	if ffd, ffdMisfits := packLargestFirst(held, cand); p.packCost(ffd, held, cand) < cost {
		bins, misfits, cost = ffd, ffdMisfits, p.packCost(ffd, held, cand)
	}
	if pat, patMisfits, ok := packByPatterns(held, cand.alloc); ok && p.packCost(pat, held, cand) < cost {
		bins, misfits, cost = pat, patMisfits, p.packCost(pat, held, cand)
	}
	for _, pairs := range []bool{false, true} {
		for _, tilt := range shapeTilts {
			if dot, dotMisfits, ok := packByShapes(held, cand.alloc, pairs, tilt); ok && p.packCost(dot, held, cand) < cost {
				bins, misfits, cost = dot, dotMisfits, p.packCost(dot, held, cand)
			}
		}
	}
	return p.openPacked(held, bins, misfits, left, cand, res)
}

// openPacked opens the machines of a packing and books their replicas.
func (p *planning) openPacked(held []scheduler.Replica, bins [][]int, misfits []int, left []scheduler.Replica, cand *candidate, res *scheduler.Result) []scheduler.Replica {
	for _, i := range misfits {
		left = append(left, held[i])
	}
	for _, bin := range bins {
		if len(bin) == 0 {
			continue
		}
		if ok, _ := p.subnetsLeft(cand.group.Cluster); !ok || !p.hasRoom(cand.group) {
			for _, i := range bin {
				left = append(left, held[i])
			}
			continue
		}
		m := p.openCandidate(cand, &held[bin[0]])
		for _, i := range bin {
			scheduler.Assign(m, held[i], nil)
			res.Placements = append(res.Placements, scheduler.Placement{ReplicaID: held[i].ID, MachineID: m.ID})
		}
	}
	return left
}

// packLargestFirst is first fit decreasing over every machine opened so
// far (the scheduler's own picker): better than packShare when replicas
// are large next to the machine and gaps need small ones from far back.
func packLargestFirst(rs []scheduler.Replica, cand *candidate) (bins [][]int, misfits []int) {
	open := func(r *scheduler.Replica, _ string) (*scheduler.Machine, string) {
		if scheduler.Fits(cand.empty(), *r) != "" {
			return nil, "does not fit"
		}
		return newMachine(fmt.Sprintf("pack-%d", len(bins)), cand.group, cand.itype, cand.offering), ""
	}
	binOf := map[string]int{}
	index := make(map[string]int, len(rs))
	plain := make([]scheduler.Replica, len(rs)) // zone rules were settled by pinZones
	unzoned := map[*scheduler.Rules]*scheduler.Rules{}
	for i, r := range rs {
		index[r.ID] = i
		plain[i] = r
		if u, ok := unzoned[r.Rules]; ok {
			plain[i].Rules = u
			continue
		}
		plain[i] = r.Reruled(func(rules *scheduler.Rules) { rules.Spread, rules.SameZone, rules.ZoneDomains = nil, false, nil })
		unzoned[r.Rules] = plain[i].Rules
	}
	res := scheduler.NewSession(nil).Place(plain, func(r *scheduler.Replica, hint string) (*scheduler.Machine, string) {
		m, why := open(r, hint)
		if m != nil {
			binOf[m.ID] = len(bins)
			bins = append(bins, nil)
		}
		return m, why
	})
	for _, pl := range res.Placements {
		b := binOf[pl.MachineID]
		bins[b] = append(bins[b], index[pl.ReplicaID])
	}
	for id := range res.Unplaced {
		misfits = append(misfits, index[id])
	}
	sort.Ints(misfits)
	return bins, misfits
}

// shapeTilts weigh CPU against memory in packByShapes' choice (1±tilt);
// each is tried, for packings that differ where the balanced choice is
// stuck.
var shapeTilts = []float64{0, 0.15, -0.15, 0.3, -0.3, 0.5, -0.5}

// maxShapes bounds the distinct request shapes packByShapes handles (it
// looks at every shape for every replica it places).
const maxShapes = 512

// packByShapes fills one machine at a time: it keeps adding a replica of
// the shape that best matches what the machine has left (the largest dot
// product of the request and the free resources, both relative to the
// machine), and opens the next machine when no shape fits. It suits
// services of many identical replicas that are large next to the machine;
// ok is false when there are too many distinct shapes.
func packByShapes(rs []scheduler.Replica, alloc api.Resources, pairs bool, tilt float64) (bins [][]int, misfits []int, ok bool) {
	groups, misfits, ok := groupByShape(rs, alloc, maxShapes)
	if !ok {
		return nil, nil, false
	}
	ac, am := math.Max(float64(alloc.MilliCPU), 1), math.Max(float64(alloc.MemoryBytes), 1)
	left := len(rs) - len(misfits)
	for left > 0 {
		free := alloc
		var bin []int
		for {
			var best *shapeGroup
			bestScore, largest := -1.0, 0.0
			for _, g := range groups {
				if len(g.members) == 0 || !free.Fits(g.req) {
					continue
				}
				score := (1+tilt)*float64(g.req.MilliCPU)/ac*float64(free.MilliCPU)/ac + (1-tilt)*float64(g.req.MemoryBytes)/am*float64(free.MemoryBytes)/am
				if score > bestScore {
					best, bestScore = g, score
				}
				largest = max(largest, float64(g.req.MilliCPU)/ac+float64(g.req.MemoryBytes)/am)
			}
			if best == nil {
				break
			}
			if pairs && pairMayFill(largest, free, ac, am) {
				best = pairOrSingle(groups, best, free, ac, am)
			}
			bin = append(bin, best.members[0])
			best.members = best.members[1:]
			free = free.Sub(best.req)
			left--
		}
		bins = append(bins, bin)
	}
	return bins, misfits, true
}

// packCost is what a packing's machines cost once right-sized: each at
// the cheapest offering of the candidate's group and zone that holds it.
func (p *planning) packCost(bins [][]int, rs []scheduler.Replica, cand *candidate) float64 {
	sizes := p.sizesOf(cand)
	total := 0.0
	for _, bin := range bins {
		var used api.Resources
		for _, i := range bin {
			used = used.Add(rs[i].Requests)
		}
		total += sizes.holding(used).offering.PricePerHour
	}
	return total
}

// sizes are the offerings a machine of one candidate can be right-sized
// to: those of its group and zone that cost less, cheapest first (in
// catalog order among equals).
type sizes struct {
	cand    *candidate
	cheaper []*candidate
}

func (p *planning) sizesOf(cand *candidate) sizes {
	var cheaper []*candidate
	for _, c := range p.catalog.plain[cand.group.Cluster] {
		if c.group == cand.group && c.offering.Zone == cand.offering.Zone && c.offering.PricePerHour < cand.offering.PricePerHour {
			cheaper = append(cheaper, c)
		}
	}
	slices.SortStableFunc(cheaper, func(a, b *candidate) int { return cmp.Compare(a.offering.PricePerHour, b.offering.PricePerHour) })
	return sizes{cand: cand, cheaper: cheaper}
}

// holding is the cheapest size that holds used (rightSize's choice): the
// candidate itself when no cheaper one does.
func (s sizes) holding(used api.Resources) *candidate {
	for _, c := range s.cheaper {
		if c.alloc.Fits(used) {
			return c
		}
	}
	return s.cand
}

// groupByShape groups the replicas the allocatable holds by request shape
// (in order of first appearance) and lists the others as misfits; ok is
// false past most shapes.
func groupByShape(rs []scheduler.Replica, alloc api.Resources, most int) (groups []*shapeGroup, misfits []int, ok bool) {
	byReq := map[api.Resources]*shapeGroup{}
	for i, r := range rs {
		if !alloc.Fits(r.Requests) {
			misfits = append(misfits, i)
			continue
		}
		g := byReq[r.Requests]
		if g == nil {
			if len(groups) == most {
				return nil, nil, false
			}
			g = &shapeGroup{req: r.Requests}
			byReq[r.Requests] = g
			groups = append(groups, g)
		}
		g.members = append(g.members, i)
	}
	return groups, misfits, true
}

// shapeGroup is the replicas of one request shape still to pack.
type shapeGroup struct {
	req     api.Resources
	members []int
}

// pairMayFill: two replicas, none larger than largest, may fill the 90%
// of free that pairOrSingle asks of a pair; far from the end of a
// machine they cannot, and the search of every pair of shapes is spared
// (it was most of a large plan's time).
func pairMayFill(largest float64, free api.Resources, ac, am float64) bool {
	return 2*largest*(1+1e-9) > 0.9*(float64(free.MilliCPU)/ac+float64(free.MemoryBytes)/am)
}

// pairOrSingle: near the end of a machine, the first of the two replicas
// that fill the rest beats the best single one.
func pairOrSingle(groups []*shapeGroup, best *shapeGroup, free api.Resources, ac, am float64) *shapeGroup {
	pair := bestPair(groups, free, ac, am)
	if pair[0] == nil {
		return best
	}
	single := float64(best.req.MilliCPU)/ac + float64(best.req.MemoryBytes)/am
	both := float64(pair[0].req.MilliCPU+pair[1].req.MilliCPU)/ac + float64(pair[0].req.MemoryBytes+pair[1].req.MemoryBytes)/am
	if freeSize := float64(free.MilliCPU)/ac + float64(free.MemoryBytes)/am; both > single && both > 0.9*freeSize {
		return pair[0]
	}
	return best
}

// bestPair is the two replicas (of shapes with replicas left) that fill
// the most of free together, or nils when no two fit.
func bestPair(groups []*shapeGroup, free api.Resources, ac, am float64) [2]*shapeGroup {
	var out [2]*shapeGroup
	bestSize := -1.0
	for i, a := range groups {
		if len(a.members) == 0 || !free.Fits(a.req) {
			continue
		}
		rest := free.Sub(a.req)
		for _, b := range groups[i:] {
			if len(b.members) == 0 || (a == b && len(a.members) < 2) || !rest.Fits(b.req) {
				continue
			}
			if size := float64(a.req.MilliCPU+b.req.MilliCPU)/ac + float64(a.req.MemoryBytes+b.req.MemoryBytes)/am; size > bestSize {
				out, bestSize = [2]*shapeGroup{a, b}, size
			}
		}
	}
	return out
}

// byShape sorts indexes of rs from CPU-heavy to memory-heavy (the angle of
// the request with CPU and memory scaled by dc and dm), stable.
func byShape(rs []scheduler.Replica, order []int, dc, dm float64) []int {
	angle := make(map[int]float64, len(order))
	for _, i := range order {
		angle[i] = math.Atan2(float64(rs[i].Requests.MemoryBytes)/dm, float64(rs[i].Requests.MilliCPU)/dc)
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(angle[a], angle[b]) })
	return order
}
