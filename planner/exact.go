package planner

import (
	"cmp"
	"math"
	"math/bits"
	"slices"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/scheduler"
)

// A plan whose new machines hold a handful of replicas is also solved
// exactly: every way to split them into machines, each machine the
// cheapest offering that takes its replicas, zones chosen so that zone
// spreads hold. The planner's heuristics are built for many replicas; on
// a few they bought a large type for three small replicas, or gave each
// of two services kept apart from themselves its own machines where one
// machine could hold one of each (TestTinyPlansAgainstBruteForce). Only
// rules the search keeps exactly are allowed: required anti-affinity on
// machine, dedication, and zone spread of a service with no replica
// elsewhere; a plan with anything else keeps its heuristic answer.

// exactReplicaLimit: at most this many replicas on new machines (the
// splits of 8 are 4,140).
const exactReplicaLimit = 8

// exactSearch is the state of one exact solution.
type exactSearch struct {
	rs    []scheduler.Replica
	cands []*candidate
	// price[mask] is the cheapest offering that takes the replicas of the
	// mask together (+Inf when none), at[mask] that offering; byZone the
	// same per zone, for masks holding a zone spread's replicas.
	price  []float64
	at     []*candidate
	byZone []map[string]*candidate
	zoned  uint
	zones  []string
	block  []uint // the split being built
	best   float64
	split  []uint
	chosen []*candidate
}

// solveExactly replaces the plan's new machines with the cheapest split
// when it costs less; it reports whether it did.
func (p *planning) solveExactly(res *scheduler.Result) bool {
	rs, where, ok := p.exactCase(res)
	if !ok {
		return false
	}
	s := &exactSearch{rs: rs, cands: p.catalog.plain[rs[0].Cluster]}
	for _, b := range p.bins {
		s.best += b.offering.PricePerHour
	}
	current := s.best
	s.prepare()
	s.search(0)
	if s.split == nil || s.best >= current*(1-1e-9) || !p.roomFor(s.chosen) {
		return false
	}
	for _, b := range p.bins {
		p.added[Key(b.group.Cluster, b.group.ID)]--
	}
	p.bins = p.bins[:0]
	for k, mask := range s.split {
		first := bits.TrailingZeros(mask)
		m := p.openCandidate(s.chosen[k], &rs[first])
		for i := range rs {
			if mask&(1<<i) != 0 {
				scheduler.Assign(m, rs[i], nil)
				res.Placements[where[i]].MachineID = m.ID
			}
		}
	}
	return true
}

// exactCase: the replicas on new machines, and their placements' indexes,
// when the plan is one the exact search may answer.
func (p *planning) exactCase(res *scheduler.Result) ([]scheduler.Replica, []int, bool) {
	if len(p.bins) < 1 || len(p.bins) > exactReplicaLimit {
		return nil, nil, false // every new machine holds a replica (dropEmptyBins)
	}
	onBin := map[string]bool{}
	for _, b := range p.bins {
		if b.floor {
			return nil, nil, false
		}
		onBin[b.m.ID] = true
	}
	where := map[string]int{} // a replica on a new machine → its placement
	for i, pl := range res.Placements {
		if onBin[pl.MachineID] {
			if len(where) == exactReplicaLimit {
				return nil, nil, false
			}
			where[pl.ReplicaID] = i
		}
	}
	var rs []scheduler.Replica
	var at []int
	for i := range p.in.Pending {
		r := &p.in.Pending[i]
		pl, ok := where[r.ID]
		if !ok {
			continue
		}
		if !exactRules(r) || (len(rs) > 0 && r.Cluster != rs[0].Cluster) {
			return nil, nil, false
		}
		rs, at = append(rs, *r), append(at, pl)
	}
	if len(rs) != len(where) || p.spreadElsewhere(rs, where, res) {
		return nil, nil, false
	}
	return rs, at, true
}

// spreadElsewhere: a zone spread among rs has a replica that is not on
// the plan's new machines (on a live machine, placed or running): its
// zones count too, and the search does not see them.
func (p *planning) spreadElsewhere(rs []scheduler.Replica, onNew map[string]int, res *scheduler.Result) bool {
	spread := map[string]bool{}
	for i := range rs {
		if zoneSkew(&rs[i]) > 0 {
			spread[rs[i].Service] = true
		}
	}
	if len(spread) == 0 {
		return false
	}
	for svc := range liveServices(p.in) {
		if spread[svc] {
			return true
		}
	}
	for _, r := range p.in.Pending {
		if _, unplaced := res.Unplaced[r.ID]; spread[r.Service] && !unplaced {
			if _, ok := onNew[r.ID]; !ok {
				return true
			}
		}
	}
	return false
}

// exactRules: the replica's rules are ones the search keeps exactly.
func exactRules(r *scheduler.Replica) bool {
	if r.GPU != nil || r.SameZone || (r.Scoring != "" && r.Scoring != api.ScoringBinpack) ||
		r.Isolation == api.IsolationTEERequired || r.Isolation == api.IsolationTEEPreferred {
		return false
	}
	for _, s := range r.Spread {
		if s.Key != api.SpreadZone {
			return false
		}
	}
	if r.Terms != nil {
		if len(r.Terms.Affinity) > 0 {
			return false
		}
		for _, t := range r.Terms.AntiAffinity {
			if !t.Required() || t.Topology != api.SpreadMachine {
				return false
			}
		}
	}
	return true
}

// prepare prices every subset of the replicas: the offerings in order of
// price, the first that takes them (per zone, for zone spreads).
func (s *exactSearch) prepare() {
	n := len(s.rs)
	cands := slices.Clone(s.cands)
	slices.SortStableFunc(cands, func(a, b *candidate) int { return cmp.Compare(a.offering.PricePerHour, b.offering.PricePerHour) })
	takes := make([][]bool, len(cands)) // takes[c][i]: candidate c's empty machine takes replica i; made when first asked
	zoneSet := map[string]bool{}
	for _, c := range cands {
		zoneSet[c.offering.Zone] = true
	}
	for z := range zoneSet {
		s.zones = append(s.zones, z)
	}
	slices.Sort(s.zones)
	for i := range s.rs {
		if zoneSkew(&s.rs[i]) > 0 {
			s.zoned |= 1 << i
		}
	}
	s.price = make([]float64, 1<<n)
	s.at = make([]*candidate, 1<<n)
	s.byZone = make([]map[string]*candidate, 1<<n)
	for mask := uint(1); mask < 1<<n; mask++ {
		s.price[mask] = math.Inf(1)
		members := s.members(mask)
		if _, _, broken := scheduler.KeptApartBroken(members); broken || dedicationBroken(members) {
			continue
		}
		var sum api.Resources
		for _, r := range members {
			sum = sum.Add(r.Requests)
		}
		zoned := mask&s.zoned != 0
		if zoned {
			s.byZone[mask] = map[string]*candidate{}
		}
		for c, cand := range cands {
			if !cand.alloc.Fits(sum) || (zoned && s.byZone[mask][cand.offering.Zone] != nil) || !inDomains(members, cand.offering.Zone) {
				continue
			}
			if takes[c] == nil {
				takes[c] = make([]bool, n)
				for i := range s.rs {
					takes[c][i] = scheduler.Fits(cand.empty(), s.rs[i]) == ""
				}
			}
			if !takesAll(takes[c], mask) {
				continue
			}
			if s.at[mask] == nil {
				s.price[mask], s.at[mask] = cand.offering.PricePerHour, cand
			}
			if !zoned {
				break
			}
			s.byZone[mask][cand.offering.Zone] = cand
			if len(s.byZone[mask]) == len(s.zones) {
				break
			}
		}
	}
}

func (s *exactSearch) members(mask uint) []scheduler.Replica {
	var out []scheduler.Replica
	for i := range s.rs {
		if mask&(1<<i) != 0 {
			out = append(out, s.rs[i])
		}
	}
	return out
}

func takesAll(takes []bool, mask uint) bool {
	for i, ok := range takes {
		if mask&(1<<i) != 0 && !ok {
			return false
		}
	}
	return true
}

// inDomains: the zone is one every zone spread among the replicas may use.
func inDomains(rs []scheduler.Replica, zone string) bool {
	for i := range rs {
		if zoneSkew(&rs[i]) > 0 && !slices.Contains(rs[i].ZoneDomains, zone) {
			return false
		}
	}
	return true
}

func dedicationBroken(rs []scheduler.Replica) bool {
	seen := map[string]bool{}
	for _, r := range rs {
		if r.Dedicated && seen[r.Service] {
			return true
		}
		seen[r.Service] = true
	}
	return false
}

// search puts replica i in each block so far or a new one; at the end it
// prices the split (zones chosen when zone spreads ask).
func (s *exactSearch) search(i int) {
	cost := 0.0
	for _, mask := range s.block {
		cost += s.price[mask]
	}
	if cost >= s.best*(1-1e-12) {
		return // adding replicas to machines never makes them cheaper
	}
	if i == len(s.rs) {
		s.settle(cost)
		return
	}
	for k := range s.block {
		s.block[k] |= 1 << i
		if !math.IsInf(s.price[s.block[k]], 1) {
			s.search(i + 1)
		}
		s.block[k] &^= 1 << i
	}
	if !math.IsInf(s.price[1<<i], 1) {
		s.block = append(s.block, 1<<i)
		s.search(i + 1)
		s.block = s.block[:len(s.block)-1]
	}
}

// settle records a complete split if it is the cheapest so far.
func (s *exactSearch) settle(cost float64) {
	if s.zoned == 0 {
		if cost < s.best*(1-1e-12) {
			s.best, s.split = cost, append([]uint(nil), s.block...)
			s.chosen = make([]*candidate, len(s.block))
			for k, mask := range s.block {
				s.chosen[k] = s.at[mask]
			}
		}
		return
	}
	chosen := make([]*candidate, len(s.block))
	s.chooseZones(0, 0, chosen)
}

// chooseZones gives the blocks with zone spreads a zone each, the others
// their cheapest offering, and keeps the cheapest choice whose spreads
// hold.
func (s *exactSearch) chooseZones(k int, cost float64, chosen []*candidate) {
	if cost >= s.best*(1-1e-12) {
		return
	}
	if k == len(s.block) {
		if s.spreadsHold(chosen) {
			s.best, s.split, s.chosen = cost, append([]uint(nil), s.block...), append([]*candidate(nil), chosen...)
		}
		return
	}
	mask := s.block[k]
	if mask&s.zoned == 0 {
		chosen[k] = s.at[mask]
		s.chooseZones(k+1, cost+s.price[mask], chosen)
		return
	}
	for _, z := range s.zones {
		if c := s.byZone[mask][z]; c != nil {
			chosen[k] = c
			s.chooseZones(k+1, cost+c.offering.PricePerHour, chosen)
		}
	}
}

// spreadsHold: every zone spread's replicas keep their skew over the
// zones they may use.
func (s *exactSearch) spreadsHold(chosen []*candidate) bool {
	counts := map[string]map[string]int{}
	for k, mask := range s.block {
		for i := range s.rs {
			if mask&(1<<i) != 0 && s.zoned&(1<<i) != 0 {
				svc := s.rs[i].Service
				if counts[svc] == nil {
					counts[svc] = map[string]int{}
				}
				counts[svc][chosen[k].offering.Zone]++
			}
		}
	}
	for i := range s.rs {
		r := &s.rs[i]
		if s.zoned&(1<<i) == 0 {
			continue
		}
		lo, hi := math.MaxInt, 0
		for _, z := range r.ZoneDomains {
			lo, hi = min(lo, counts[r.Service][z]), max(hi, counts[r.Service][z])
		}
		if hi-lo > zoneSkew(r) {
			return false
		}
	}
	return true
}

// roomFor: the groups and the cluster's subnets hold the chosen machines
// once the plan's new ones are gone.
func (p *planning) roomFor(chosen []*candidate) bool {
	perGroup := map[*Group]int{}
	for _, c := range chosen {
		perGroup[c.group]++
	}
	for g, n := range perGroup {
		removed := 0
		for _, b := range p.bins {
			if b.group == g {
				removed++
			}
		}
		if g.Live+p.added[Key(g.Cluster, g.ID)]-removed+n > g.MaxSize {
			return false
		}
	}
	_, limited := p.in.Subnets[chosen[0].group.Cluster]
	return !limited || len(chosen) <= len(p.bins)
}
