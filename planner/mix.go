package planner

import (
	"math"
	"slices"
	"sort"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/scheduler"
)

// Replicas without placement rules are packed after the others, on the
// machines the plan buys for them in the proportions of the LP relaxation's
// optimal mix of instance types: the relaxation says how much CPU and
// memory each type should supply; the replicas are split among the types
// so that each share matches what its type supplies, CPU-heavy replicas to
// CPU-rich types; each share is then packed on machines of its own type.
// Without that split the cheapest type per unit of the total demand takes
// everything, and machines of one shape fill one resource and leave the
// other idle.

// shapeable: nothing but resources decides where the replica goes, so any
// machine type of its cluster with room will do.
func shapeable(r *scheduler.Replica, shunned map[string]bool) bool {
	return len(r.Spread) == 0 && !r.SameZone && !r.Dedicated && r.Terms == nil && r.GPU == nil &&
		r.Isolation != api.IsolationTEERequired && r.Isolation != api.IsolationTEEPreferred &&
		(r.Scoring == "" || r.Scoring == api.ScoringBinpack) && !shunned[r.Service]
}

// shunnedServices are services whose replicas some required anti-affinity
// term selects (pending or running): they keep the scheduler's rules. It
// reports too whether any pending replica or resident has affinity terms
// (exclusiveServices asks: one walk of every machine's residents, not
// two).
func shunnedServices(in Input) (map[string]bool, bool) {
	terms := map[string][]api.AffinityTerm{} // by service: its replicas share them
	labels := map[string]map[string]string{}
	anyTerms := false
	for _, r := range in.Pending {
		labels[r.Service] = r.Labels
		anyTerms = anyTerms || r.Terms != nil
		if _, seen := terms[r.Service]; !seen && r.Terms != nil {
			terms[r.Service] = r.Terms.AntiAffinity
		}
	}
	var last *scheduler.Replica // residents come in runs of one service's replicas, sharing their terms: one look a run
	for i, m := range in.Machines {
		if in.Rooms != nil && !in.Rooms[i].Teaches {
			continue // no resident to learn: not read
		}
		for _, res := range taughtResidents(m.Machine) {
			if last != nil && res.Replica.Service == last.Service && res.Replica.Terms == last.Terms {
				continue
			}
			last = res.Replica
			anyTerms = anyTerms || res.Replica.Terms != nil
			if _, seen := terms[res.Replica.Service]; !seen && res.Replica.Terms != nil {
				terms[res.Replica.Service] = res.Replica.Terms.AntiAffinity
			}
		}
	}
	out := map[string]bool{}
	for svc, l := range labels {
		for _, ts := range terms {
			for _, t := range ts {
				if t.Required() && api.LabelsMatch(l, t.Selector) {
					out[svc] = true
				}
			}
		}
	}
	return out, anyTerms
}

// share is the replicas one instance type of the mix gets.
type share struct {
	itype    string
	alloc    api.Resources
	capacity [2]float64 // CPU and memory the type supplies in the mix
	used     [2]float64
	replicas []scheduler.Replica
}

// splitByMix divides a cluster's replicas among the types of the LP mix.
// Largest replicas first, each to the share it fills least (in its fuller
// resource after taking it), which keeps every share's CPU and memory in
// its type's proportion.
func splitByMix(rs []scheduler.Replica, cols []column, mix []float64) []*share {
	var shares []*share
	for i, x := range mix {
		if x > 1e-9 {
			shares = append(shares, &share{itype: cols[i].name, alloc: cols[i].alloc,
				capacity: [2]float64{x * float64(cols[i].alloc.MilliCPU), x * float64(cols[i].alloc.MemoryBytes)}})
		}
	}
	if len(shares) == 0 {
		return nil
	}
	if len(shares) == 1 {
		shares[0].replicas = rs
		return shares
	}
	if len(shares) == 2 && splitInWindow(rs, shares) {
		return shares
	}
	demand := totalDemand(rs)
	size := func(r scheduler.Replica) float64 {
		return float64(r.Requests.MilliCPU)/math.Max(float64(demand.MilliCPU), 1) + float64(r.Requests.MemoryBytes)/math.Max(float64(demand.MemoryBytes), 1)
	}
	order := make([]scheduler.Replica, len(rs))
	copy(order, rs)
	sort.SliceStable(order, func(i, j int) bool { return size(order[i]) > size(order[j]) })
	for _, r := range order {
		req := [2]float64{float64(r.Requests.MilliCPU), float64(r.Requests.MemoryBytes)}
		var best *share
		bestFill := math.Inf(1)
		for _, s := range shares {
			if !s.alloc.Fits(r.Requests) {
				continue
			}
			fill := 0.0
			for d := range req {
				if s.capacity[d] > 0 {
					fill = math.Max(fill, (s.used[d]+req[d])/s.capacity[d])
				} else if req[d] > 0 {
					fill = math.Inf(1)
				}
			}
			if fill < bestFill {
				best, bestFill = s, fill
			}
		}
		if best == nil {
			best = shares[0]
		}
		best.used[0] += req[0]
		best.used[1] += req[1]
		best.replicas = append(best.replicas, r)
	}
	return shares
}

// placeByMix opens machines for replicas without rules (or pinned to a
// zone, see pinZones), per cluster and zone one LP-mix share at a time,
// each packed on the offering that suits its own demand (packShare). It
// returns the machines it opened and the replicas it could not place.
func (p *planning) placeByMix(rs []scheduler.Replica, zones map[string]string, res *scheduler.Result) ([]*scheduler.Machine, []scheduler.Replica) {
	type where struct{ cluster, zone string }
	byPlace := map[where][]scheduler.Replica{}
	var places []where
	for _, r := range rs {
		w := where{r.Cluster, zones[r.ID]}
		if _, ok := byPlace[w]; !ok {
			places = append(places, w)
		}
		byPlace[w] = append(byPlace[w], r)
	}
	sort.Slice(places, func(i, j int) bool {
		if places[i].cluster != places[j].cluster {
			return places[i].cluster < places[j].cluster
		}
		return places[i].zone < places[j].zone
	})
	first := len(p.bins)
	var left []scheduler.Replica
	for _, w := range places {
		group := byPlace[w]
		cols := p.typeColumns(w.cluster)
		if w.zone != "" {
			cols = slices.DeleteFunc(p.zoneColumns(w.cluster), func(c column) bool { return c.zone != w.zone })
		}
		_, mix := lpSolve(totalDemand(group), cols)
		shares := splitByMix(group, cols, mix)
		if shares == nil {
			shares = []*share{{replicas: group}}
		}
		for _, s := range shares {
			if len(s.replicas) == 0 {
				continue
			}
			cand := p.shareCandidate(s.replicas, w.zone)
			if cand == nil {
				left = append(left, s.replicas...)
				continue
			}
			stay, moved, other := p.splitLarge(s.replicas, cand, w.zone)
			left = append(left, p.packOnCandidate(stay, cand, res)...)
			if len(moved) > 0 {
				left = append(left, p.packOnCandidate(moved, other, res)...)
			}
		}
	}
	var opened []*scheduler.Machine
	for _, b := range p.bins[first:] {
		opened = append(opened, b.m)
	}
	return opened, left
}

// pinZones picks the zone of replicas whose only rule is about zones and
// whose service runs nowhere yet, so that they can be packed like
// replicas without rules, zone by zone: a sameZone service goes to the
// zone of its cheapest offering; a zone spread deals its replicas to its
// zones in turn (the first zone turning with each service), which keeps
// every skew within 1.
func (p *planning) pinZones(in Input, shunned map[string]bool, live func() map[string]bool) map[string]string {
	byService := map[string][]scheduler.Replica{}
	var services []string
	for _, r := range in.Pending {
		if !zonePinnable(&r, shunned) || live()[r.Service] {
			continue
		}
		if _, ok := byService[r.Service]; !ok {
			services = append(services, r.Service)
		}
		byService[r.Service] = append(byService[r.Service], r)
	}
	sort.Strings(services)
	out := map[string]string{}
	for turn, svc := range services {
		rs := byService[svc]
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Index < rs[j].Index })
		if rs[0].SameZone {
			cand, _ := p.catalog.best(&rs[0], "", p.hasRoom)
			if cand == nil {
				continue
			}
			for _, r := range rs {
				out[r.ID] = cand.offering.Zone
			}
			continue
		}
		zones := rs[0].ZoneDomains
		if !p.allLaunchable(&rs[0], zones) {
			continue
		}
		for i, r := range rs {
			out[r.ID] = zones[(i+turn)%len(zones)]
		}
	}
	return out
}

// allLaunchable: a machine for r can be launched in each of the zones
// now. Dealt to every zone, a spread service's replicas keep within its
// skew only once each zone gets its share: with a zone out of capacity,
// the replicas dealt to the others alone went past it, so that no machine
// launched for them could take them all and each pass launched another.
// Such a service is placed by the scheduler's spread rules instead.
func (p *planning) allLaunchable(r *scheduler.Replica, zones []string) bool {
	for _, z := range zones {
		if cand, _ := p.catalog.best(r, z, p.hasRoom); cand == nil {
			return false
		}
	}
	return true
}

// zonePinnable: the replica's only rule is sameZone or a zone spread
// (over known zones), and it could otherwise go anywhere.
func zonePinnable(r *scheduler.Replica, shunned map[string]bool) bool {
	plain := r.Reruled(func(rules *scheduler.Rules) { rules.Spread, rules.SameZone = nil, false })
	if !shapeable(&plain, shunned) {
		return false
	}
	if r.SameZone {
		return len(r.Spread) == 0
	}
	return len(r.Spread) == 1 && r.Spread[0].Key == api.SpreadZone && r.Spread[0].MaxSkew >= 1 && len(r.ZoneDomains) > 0
}

// splitInWindow splits replicas between two types exactly in the LP's
// proportions: sorted by shape, the memory-rich type takes one contiguous
// window of shapes and the CPU-rich type both tails, the window placed so
// that each side gets its type's CPU and its type's memory. It reports
// false when some replica does not fit a type (the greedy split handles
// that).
func splitInWindow(rs []scheduler.Replica, shares []*share) bool {
	for _, r := range rs {
		if !shares[0].alloc.Fits(r.Requests) || !shares[1].alloc.Fits(r.Requests) {
			return false
		}
	}
	rich, lean := shares[0], shares[1] // rich: more memory per CPU
	if rich.capacity[1]*lean.capacity[0] < lean.capacity[1]*rich.capacity[0] {
		rich, lean = lean, rich
	}
	demand := totalDemand(rs)
	dc, dm := math.Max(float64(demand.MilliCPU), 1), math.Max(float64(demand.MemoryBytes), 1)
	// The window's target: the rich type's share of each resource.
	wantCPU := dc * rich.capacity[0] / (rich.capacity[0] + lean.capacity[0])
	wantMem := dm * rich.capacity[1] / (rich.capacity[1] + lean.capacity[1])
	idx := make([]int, len(rs))
	for i := range idx {
		idx[i] = i
	}
	idx = byShape(rs, idx, dc, dm)
	n := len(idx)
	cpu, mem := make([]float64, n+1), make([]float64, n+1) // prefix sums
	for k, i := range idx {
		cpu[k+1] = cpu[k] + float64(rs[i].Requests.MilliCPU)
		mem[k+1] = mem[k] + float64(rs[i].Requests.MemoryBytes)
	}
	// For each start, the end that gives the window wantCPU; the window's
	// memory grows as it slides toward memory-heavy shapes: keep the start
	// whose memory is closest to wantMem.
	bestStart, bestEnd, bestMiss := 0, 0, math.Inf(1)
	for start := 0; start <= n; start++ {
		end := sort.Search(n-start+1, func(k int) bool { return cpu[start+k]-cpu[start] >= wantCPU }) + start
		if end > n {
			break
		}
		if miss := math.Abs(mem[end] - mem[start] - wantMem); miss < bestMiss {
			bestStart, bestEnd, bestMiss = start, end, miss
		}
	}
	for k, i := range idx {
		if k >= bestStart && k < bestEnd {
			rich.replicas = append(rich.replicas, rs[i])
		} else {
			lean.replicas = append(lean.replicas, rs[i])
		}
	}
	return true
}
