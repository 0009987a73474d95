package planner

import (
	"cmp"
	"math"
	"slices"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/scheduler"
)

// The LP relaxation fills every machine to the brim; replicas larger than
// half a machine cannot share one with another of their kind, and when
// too few small replicas are left to fill the other half, the plan pays
// for the gap the relaxation never sees. Then some of the large replicas
// are better off on a larger type that holds several of them: the share
// is packed with growing fractions of its large replicas moved to the type
// cheapest per large replica, and the cheapest packing is kept.

// largeFractions are the fractions of a share's large replicas tried on
// the type that holds several of them.
var largeFractions = []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1}

// splitLarge returns the share's replicas to pack on cand and those to
// pack on other (nil when moving none is cheapest).
func (p *planning) splitLarge(rs []scheduler.Replica, cand *candidate, zone string) (stay, moved []scheduler.Replica, other *candidate) {
	var large, small []scheduler.Replica
	for _, r := range rs {
		if 2*r.Requests.MilliCPU > cand.alloc.MilliCPU || 2*r.Requests.MemoryBytes > cand.alloc.MemoryBytes {
			large = append(large, r)
		} else {
			small = append(small, r)
		}
	}
	if len(large) == 0 {
		return rs, nil, nil
	}
	other = p.holdsSeveral(large, zone)
	if other == nil {
		return rs, nil, nil
	}
	// Largest first: those waste the most beside each other.
	slices.SortStableFunc(large, func(a, b scheduler.Replica) int {
		return cmp.Compare(relativeSize(b.Requests, cand.alloc), relativeSize(a.Requests, cand.alloc))
	})
	bestStay, bestMoved, bestCost := rs, []scheduler.Replica(nil), math.Inf(1)
	for _, f := range largeFractions {
		n := int(math.Round(f * float64(len(large))))
		fillers := fillersFor(large[:n], small, other)
		moved := append(append([]scheduler.Replica(nil), large[:n]...), small[:fillers]...)
		stay := append(append([]scheduler.Replica(nil), large[n:]...), small[fillers:]...)
		cost := p.estimateCost(stay, cand) + p.estimateCost(moved, other)
		if cost < bestCost*(1-1e-9) {
			bestStay, bestMoved, bestCost = stay, moved, cost
		}
	}
	if len(bestMoved) == 0 {
		return rs, nil, nil
	}
	return bestStay, bestMoved, other
}

// fillersFor is how many of the small replicas (from the front) fill the
// room the moved large ones leave on the other type's machines.
func fillersFor(moved, small []scheduler.Replica, other *candidate) int {
	if len(moved) == 0 {
		return 0
	}
	var most, used api.Resources
	for _, r := range moved {
		most = maxResources(most, r.Requests)
		used = used.Add(r.Requests)
	}
	perMachine := math.Min(float64(other.alloc.MilliCPU)/math.Max(float64(most.MilliCPU), 1), float64(other.alloc.MemoryBytes)/math.Max(float64(most.MemoryBytes), 1))
	machines := int64(math.Ceil(float64(len(moved)) / math.Max(math.Floor(perMachine), 1)))
	room := api.Resources{MilliCPU: machines * other.alloc.MilliCPU * 19 / 20, MemoryBytes: machines * other.alloc.MemoryBytes * 19 / 20}
	n := 0
	for n < len(small) && room.Fits(used.Add(small[n].Requests)) {
		used = used.Add(small[n].Requests)
		n++
	}
	return n
}

// estimateCost is the cheapest of the zipper's, first fit decreasing's and
// (for few shapes) the patterns' packings of rs on the candidate,
// right-sized.
func (p *planning) estimateCost(rs []scheduler.Replica, cand *candidate) float64 {
	if len(rs) == 0 {
		return 0
	}
	zip, _ := packShare(rs, cand.alloc, openWindows[0])
	ffd, _ := packLargestFirst(rs, cand)
	cost := math.Min(p.packCost(zip, rs, cand), p.packCost(ffd, rs, cand))
	if patterns, _, ok := packByPatterns(rs, cand.alloc); ok {
		cost = math.Min(cost, p.packCost(patterns, rs, cand))
	}
	return cost
}

// relativeSize is the request's larger share of the machine.
func relativeSize(req, alloc api.Resources) float64 {
	return math.Max(float64(req.MilliCPU)/math.Max(float64(alloc.MilliCPU), 1), float64(req.MemoryBytes)/math.Max(float64(alloc.MemoryBytes), 1))
}

// holdsSeveral is the offering cheapest per large replica among those
// whose machine holds at least two of the largest.
func (p *planning) holdsSeveral(large []scheduler.Replica, zone string) *candidate {
	var most api.Resources
	for _, r := range large {
		most = maxResources(most, r.Requests)
	}
	var best *candidate
	bestPer := math.Inf(1)
	for _, c := range p.catalog.plain[large[0].Cluster] {
		if (zone != "" && c.offering.Zone != zone) || !p.hasRoom(c.group) || scheduler.Fits(c.empty(), large[0]) != "" {
			continue
		}
		fit := math.Inf(1)
		if most.MilliCPU > 0 {
			fit = math.Floor(float64(c.alloc.MilliCPU) / float64(most.MilliCPU))
		}
		if most.MemoryBytes > 0 {
			fit = math.Min(fit, math.Floor(float64(c.alloc.MemoryBytes)/float64(most.MemoryBytes)))
		}
		if fit < 2 {
			continue
		}
		if per := c.offering.PricePerHour / fit; per < bestPer {
			best, bestPer = c, per
		}
	}
	return best
}
