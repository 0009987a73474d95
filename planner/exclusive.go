package planner

import (
	"cmp"
	"math"
	"reflect"
	"slices"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/scheduler"
)

// Replicas whose only rule keeps them one per machine (a required
// anti-affinity on machine to their own service, and nothing else selects
// them or is selected by them) are packed together: the largest such
// service says how many machines any plan needs; the LP relaxation, with
// that count as a row and each machine's useful size capped at one replica
// of every service, says which instance types; every service is then
// dealt over those machines, each replica to the roomiest machine that has
// none of its service yet, so all of them fill evenly and right-sizing
// finds each a snug type. The ordinary opener would give the first
// machines every service and leave the rest holding one large service's
// replicas apiece. Services whose only rule is a machine spread, and that
// have no more replicas than those machines, are dealt with them: one
// replica per machine keeps their spread.

// exclusiveServices are the services whose required anti-affinity on
// machine selects their own replicas and no other service's, whose
// replicas no other service's term selects, and who have no other
// affinity term. anyTerms: a pending replica or a resident has affinity
// terms (as shunnedServices reports).
func exclusiveServices(in Input, anyTerms bool) map[string]bool {
	if !anyTerms {
		return map[string]bool{} // no term: no walk of every resident's labels
	}
	terms := map[string]*scheduler.Terms{}
	labels := map[string]map[string]string{}
	note := func(r *scheduler.Replica) {
		if _, ok := labels[r.Service]; !ok {
			labels[r.Service] = r.Labels
		}
		if _, ok := terms[r.Service]; !ok && r.Terms != nil {
			terms[r.Service] = r.Terms
		}
	}
	for i := range in.Pending {
		note(&in.Pending[i])
	}
	var last *scheduler.Replica // residents come in runs of one service's replicas, sharing their terms: one note a run
	for _, m := range in.Machines {
		for i := range m.Residents {
			if r := m.Residents[i].Replica; last == nil || r.Service != last.Service || r.Terms != last.Terms {
				note(r)
				last = r
			}
		}
	}
	out := map[string]bool{}
	spoiled := map[string]bool{}
	for svc, ts := range terms {
		if len(ts.Affinity) > 0 || len(ts.AntiAffinity) == 0 {
			spoiled[svc] = true
		}
		for _, t := range ts.AntiAffinity {
			selfOnly := t.Required() && t.Topology == api.SpreadMachine
			for other, l := range labels {
				if api.LabelsMatch(l, t.Selector) && other != svc {
					selfOnly = false
					spoiled[other] = true
				}
			}
			if !selfOnly || !api.LabelsMatch(labels[svc], t.Selector) {
				spoiled[svc] = true
			}
		}
		out[svc] = true
	}
	for svc := range spoiled {
		delete(out, svc)
	}
	return out
}

// exclusivePackable: the replica's service is exclusive and, its
// anti-affinity aside, nothing but resources decides where it goes.
func exclusivePackable(r *scheduler.Replica, exclusive map[string]bool) bool {
	if !exclusive[r.Service] {
		return false
	}
	plain := r.Reruled(func(rules *scheduler.Rules) { rules.Terms = nil })
	return shapeable(&plain, nil)
}

// exclusiveMachine is a machine packExclusive may open.
type exclusiveMachine struct {
	cand     *candidate
	free     api.Resources
	services map[string]bool
	replicas []int
	// takesAll: every replica of the pass passes the machine's static checks.
	takesAll bool
}

// exclusiveSlack are the margins over the LP's machine counts tried in
// turn: dealing replicas one per machine cannot fill machines as the
// relaxation does, so the first margin that leaves no replica without a
// machine is kept (right-sizing then trims what the margin left idle).
var exclusiveSlack = []float64{0, 0.03, 0.06, 0.1, 0.15, 0.2, 0.3}

// packExclusive opens machines for exclusive replicas of one cluster (see
// above) and books them there; it returns the machines it opened and the
// replicas it could not place.
func (p *planning) packExclusive(rs []scheduler.Replica, res *scheduler.Result) ([]*scheduler.Machine, []scheduler.Replica) {
	if len(rs) == 0 {
		return nil, nil
	}
	byService := map[string][]int{}
	var services []string
	for i, r := range rs {
		if _, ok := byService[r.Service]; !ok {
			services = append(services, r.Service)
		}
		byService[r.Service] = append(byService[r.Service], i)
	}
	forced, spreadMost := 0, 0
	for _, idx := range byService {
		if selfExclusive(&rs[idx[0]]) {
			forced = max(forced, len(idx))
		} else {
			spreadMost = max(spreadMost, len(idx))
		}
	}
	if forced == 0 {
		// Machine spreads alone: as many machines as the largest has
		// replicas hold each one replica a machine.
		forced = spreadMost
	}
	// A spread service is dealt only when the forced machines hold it one
	// replica each: its replicas then fill their room instead of stacking
	// up on a few.
	var left []scheduler.Replica
	services = slices.DeleteFunc(services, func(svc string) bool {
		idx := byService[svc]
		if len(idx) <= forced || selfExclusive(&rs[idx[0]]) {
			return false
		}
		for _, i := range idx {
			left = append(left, rs[i])
		}
		delete(byService, svc)
		return true
	})
	mix := p.exclusiveMix(rs, byService, forced)
	machines, unplaced := p.dealCheapest(rs, bySize(rs, services, byService, mix), byService, mix)
	left = append(left, unplaced...)
	var opened []*scheduler.Machine
	for _, em := range machines {
		if len(em.replicas) == 0 {
			continue
		}
		if ok, _ := p.subnetsLeft(em.cand.group.Cluster); !ok || !p.hasRoom(em.cand.group) {
			for _, i := range em.replicas {
				left = append(left, rs[i])
			}
			continue
		}
		// Opened at its right size: compaction then has no room to move
		// replicas into that dealing did not plan.
		m := p.openCandidate(p.sizesOf(em.cand).holding(em.cand.alloc.Sub(em.free)), &rs[em.replicas[0]])
		for _, i := range em.replicas {
			scheduler.Assign(m, rs[i], nil)
			res.Placements = append(res.Placements, scheduler.Placement{ReplicaID: rs[i].ID, MachineID: m.ID})
		}
		opened = append(opened, m)
	}
	return opened, left
}

// dealCheapest deals the services over the mix's fleet grown by each
// margin in turn, with each pick rule, and keeps the dealing that leaves
// fewest replicas out, then costs least once right-sized.
func (p *planning) dealCheapest(rs []scheduler.Replica, services []string, byService map[string][]int, mix fleetMix) ([]*exclusiveMachine, []scheduler.Replica) {
	var machines []*exclusiveMachine
	var unplaced []scheduler.Replica
	best := math.Inf(1)
	runs := make(map[string][][]int, len(services))
	for _, svc := range services {
		runs[svc] = sameRuns(rs, byService[svc])
	}
	for _, fit := range []pickRule{roomiest, snuggest} {
		for _, slack := range exclusiveSlack {
			dealt, rest, extra := p.dealExclusive(rs, services, runs, mix.fleet(slack), fit)
			cost := p.dealtCost(dealt, rs)
			if machines == nil || len(rest) < len(unplaced) || (len(rest) == len(unplaced) && cost < best) {
				machines, unplaced, best = dealt, rest, cost
			}
			if extra == 0 && len(rest) == 0 {
				break
			}
		}
	}
	return machines, unplaced
}

// bySize orders services by their largest replica (against the mix's
// average machine, each resource on its own), largest first, so that
// large replicas find machines before every machine is half full.
func bySize(rs []scheduler.Replica, services []string, byService map[string][]int, mix fleetMix) []string {
	var cpu, mem, n float64
	for i, c := range mix.cands[:len(mix.x)] {
		cpu += mix.x[i] * float64(c.alloc.MilliCPU)
		mem += mix.x[i] * float64(c.alloc.MemoryBytes)
		n += mix.x[i]
	}
	if n == 0 {
		return services
	}
	cpu, mem = cpu/n, mem/n
	size := map[string]float64{}
	for _, svc := range services {
		for _, i := range byService[svc] {
			req := rs[i].Requests
			size[svc] = math.Max(size[svc], math.Max(float64(req.MilliCPU)/cpu, float64(req.MemoryBytes)/mem))
		}
	}
	slices.SortStableFunc(services, func(a, b string) int {
		return cmp.Or(cmp.Compare(size[b], size[a]), cmp.Compare(len(byService[b]), len(byService[a])), cmp.Compare(a, b))
	})
	return services
}

// dealExclusive deals every service's replicas (in runs that ask the
// same: sameRuns), largest service first, each to the machine pick
// prefers among those without its service; a replica no machine holds
// gets a new one (extra counts them). One replica per machine keeps a
// machine spread too: its services have no more replicas than the
// machines dealt over.
func (p *planning) dealExclusive(rs []scheduler.Replica, services []string, runs map[string][][]int, machines []*exclusiveMachine, pick pickRule) ([]*exclusiveMachine, []scheduler.Replica, int) {
	var left []scheduler.Replica
	extra := 0
	var scratch []scoredMachine
	for _, svc := range services {
		for _, run := range runs[svc] { // sameRuns
			// A machine that takes one of the run's replicas then runs the
			// service and takes no other, and the others' scores do not
			// change: the run goes to pick's best machines in order, as
			// one replica after another would.
			var best []*exclusiveMachine
			best, scratch = pick(machines, rs[run[0]], len(run), scratch)
			for k, i := range run {
				var m *exclusiveMachine
				if k < len(best) {
					m = best[k]
				} else {
					cand := p.shareCandidate(rs[i:i+1], "")
					if cand == nil {
						left = append(left, rs[i])
						continue
					}
					m = &exclusiveMachine{cand: cand, free: cand.alloc, services: map[string]bool{}}
					machines = append(machines, m)
					extra++
				}
				m.free = m.free.Sub(rs[i].Requests)
				m.services[svc] = true
				m.replicas = append(m.replicas, i)
			}
		}
	}
	return machines, left, extra
}

// sameAsk: a and b ask for the same resources under the same rules.
func sameAsk(a, b *scheduler.Replica) bool {
	return a.Requests == b.Requests && (a.Rules == b.Rules || reflect.DeepEqual(*a.Rules, *b.Rules))
}

// sameRuns splits a service's replicas (indexes into rs) into runs that
// ask the same (requests and rules).
func sameRuns(rs []scheduler.Replica, idx []int) [][]int {
	var runs [][]int
	for start := 0; start < len(idx); {
		end := start + 1
		for end < len(idx) && sameAsk(&rs[idx[end]], &rs[idx[start]]) {
			end++
		}
		runs = append(runs, idx[start:end])
		start = end
	}
	return runs
}

// dealtCost is what the dealt machines cost once right-sized.
func (p *planning) dealtCost(machines []*exclusiveMachine, rs []scheduler.Replica) float64 {
	sizing := map[*candidate]sizes{}
	total := 0.0
	for _, m := range machines {
		if len(m.replicas) == 0 {
			continue
		}
		if _, ok := sizing[m.cand]; !ok {
			sizing[m.cand] = p.sizesOf(m.cand)
		}
		var used api.Resources
		for _, i := range m.replicas {
			used = used.Add(rs[i].Requests)
		}
		total += sizing[m.cand].holding(used).offering.PricePerHour
	}
	return total
}

// machineCharge is added to every machine of the exclusive mix, as a
// fraction of the cheapest type's price: among mixes the LP finds about as
// cheap (on a catalog priced in proportion to resources, all of them), it
// prefers fewer, larger machines, which dealing fills better (more
// replicas to a machine leave less of it idle).
const machineCharge = 0.05

// fleetMix is the LP relaxation's machines for exclusive replicas.
type fleetMix struct {
	cands  []*candidate
	x      []float64
	forced int
}

// exclusiveMix buys the replicas' demand with at least forced machines,
// each machine's useful size capped at one replica of every service.
func (p *planning) exclusiveMix(rs []scheduler.Replica, byService map[string][]int, forced int) fleetMix {
	cluster := rs[0].Cluster
	var perMachine, demand api.Resources // per machine: one replica of every service, the largest
	for _, idx := range byService {
		var most api.Resources
		for _, i := range idx {
			most = maxResources(most, rs[i].Requests)
			demand = demand.Add(rs[i].Requests)
		}
		perMachine = perMachine.Add(most)
	}
	var cols []column
	var cands []*candidate
	for _, c := range p.columns(cluster, false) {
		cand := p.cheapestOfType(cluster, c.name, rs)
		if cand == nil {
			continue
		}
		c.alloc = minResources(c.alloc, perMachine)
		cols, cands = append(cols, c), append(cands, cand)
	}
	least := math.Inf(1)
	for _, c := range cols {
		least = math.Min(least, c.price)
	}
	for i := range cols {
		cols[i].price += machineCharge * least
	}
	return fleetMix{cands: cands, x: coverWithCount(demand, cols, forced), forced: forced}
}

// fleet rounds the mix, grown by slack, to whole machines.
func (mix fleetMix) fleet(slack float64) []*exclusiveMachine {
	if mix.x == nil {
		return nil
	}
	want := make([]float64, len(mix.x))
	counts := make([]int, len(mix.x))
	total, sum := 0, 0.0
	for i, v := range mix.x {
		want[i] = v * (1 + slack)
		counts[i] = int(math.Floor(want[i] + 1e-6))
		total += counts[i]
		sum += want[i]
	}
	for total < max(mix.forced, int(math.Ceil(sum-1e-6))) {
		best := 0
		for i := range want {
			if want[i]-float64(counts[i]) > want[best]-float64(counts[best]) {
				best = i
			}
		}
		counts[best]++
		total++
	}
	var out []*exclusiveMachine
	for i, n := range counts {
		for k := 0; k < n; k++ {
			out = append(out, &exclusiveMachine{cand: mix.cands[i], free: mix.cands[i].alloc, services: map[string]bool{}, takesAll: true})
		}
	}
	return out
}

// coverWithCount solves the covering LP with a row for the machine count.
func coverWithCount(demand api.Resources, cols []column, forced int) []float64 {
	var need []float64
	supply := make([][]float64, len(cols))
	if forced > 0 {
		need = append(need, float64(forced))
		for i := range cols {
			supply[i] = []float64{1}
		}
	}
	for _, d := range resourceDims {
		if d(demand) > 0 {
			need = append(need, d(demand))
			for i, c := range cols {
				supply[i] = append(supply[i], d(c.alloc))
			}
		}
	}
	prices := make([]float64, len(cols))
	for i, c := range cols {
		prices[i] = c.price
	}
	cost, x := coverLP(need, supply, prices)
	if math.IsInf(cost, 1) {
		return nil
	}
	return x
}

// cheapestOfType is the cheapest offering of the type whose group has room
// and whose empty machine takes every replica.
func (p *planning) cheapestOfType(cluster, name string, rs []scheduler.Replica) *candidate {
	var best *candidate
	for _, c := range p.catalog.plain[cluster] {
		if c.itype.Name != name || !p.hasRoom(c.group) || (best != nil && c.offering.PricePerHour >= best.offering.PricePerHour) {
			continue
		}
		if !slices.ContainsFunc(rs, func(r scheduler.Replica) bool { return scheduler.Fits(c.empty(), r) != "" }) {
			best = c
		}
	}
	return best
}

// takes: the machine has none of the replica's service and room for it.
func (m *exclusiveMachine) takes(r scheduler.Replica) bool {
	return !m.services[r.Service] && m.free.Fits(r.Requests) && (m.takesAll || scheduler.Fits(m.cand.empty(), r) == "")
}

// pickRule chooses machines for n replicas that ask the same as r
// among machines without r's service that hold r: the best first, one
// replica each (fewer when fewer hold it). scratch is its working list,
// returned for the next call.
type pickRule func(machines []*exclusiveMachine, r scheduler.Replica, n int, scratch []scoredMachine) ([]*exclusiveMachine, []scoredMachine)

type scoredMachine struct {
	m     *exclusiveMachine
	score float64
}

// bestTakers are the n machines that take r with the highest score, the
// earlier first among equals (as a walk keeping the first best would
// find them one after another).
func bestTakers(machines []*exclusiveMachine, r scheduler.Replica, n int, scratch []scoredMachine, score func(m *exclusiveMachine, rest api.Resources) float64) ([]*exclusiveMachine, []scoredMachine) {
	if n == 1 { // the first best, without a sort
		var best *exclusiveMachine
		bestScore := math.Inf(-1)
		for _, m := range machines {
			if m.takes(r) {
				if s := score(m, m.free.Sub(r.Requests)); best == nil || s > bestScore {
					best, bestScore = m, s
				}
			}
		}
		if best == nil {
			return nil, scratch
		}
		return []*exclusiveMachine{best}, scratch
	}
	takers := scratch[:0]
	for _, m := range machines {
		if m.takes(r) {
			takers = append(takers, scoredMachine{m, score(m, m.free.Sub(r.Requests))})
		}
	}
	slices.SortStableFunc(takers, func(a, b scoredMachine) int { return cmp.Compare(b.score, a.score) })
	out := make([]*exclusiveMachine, 0, min(n, len(takers)))
	for _, t := range takers[:min(n, len(takers))] {
		out = append(out, t.m)
	}
	return out, takers
}

// snuggest prefers the machine without the replica's service that holds
// it and keeps the least room (both resources, relative to its size)
// after taking it.
func snuggest(machines []*exclusiveMachine, r scheduler.Replica, n int, scratch []scoredMachine) ([]*exclusiveMachine, []scoredMachine) {
	return bestTakers(machines, r, n, scratch, func(m *exclusiveMachine, rest api.Resources) float64 {
		return -(float64(rest.MilliCPU)/float64(m.cand.alloc.MilliCPU) + float64(rest.MemoryBytes)/float64(m.cand.alloc.MemoryBytes))
	})
}

// roomiest prefers the machine without the replica's service that holds
// it and keeps the most room (relative to its size) after taking it.
func roomiest(machines []*exclusiveMachine, r scheduler.Replica, n int, scratch []scoredMachine) ([]*exclusiveMachine, []scoredMachine) {
	return bestTakers(machines, r, n, scratch, func(m *exclusiveMachine, rest api.Resources) float64 {
		return math.Min(float64(rest.MilliCPU)/float64(m.cand.alloc.MilliCPU), float64(rest.MemoryBytes)/float64(m.cand.alloc.MemoryBytes))
	})
}

func minResources(a, b api.Resources) api.Resources {
	return api.Resources{MilliCPU: min(a.MilliCPU, b.MilliCPU), MemoryBytes: min(a.MemoryBytes, b.MemoryBytes),
		EphemeralBytes: min(a.EphemeralBytes, b.EphemeralBytes), GPUs: min(a.GPUs, b.GPUs)}
}

// spreadOnlyServices are the services that run nowhere yet, whose only
// rule is a machine spread, and whose replicas no required term selects.
func spreadOnlyServices(in Input, shunned map[string]bool, live func() map[string]bool) map[string]bool {
	out := map[string]bool{}
	for _, r := range in.Pending {
		if len(r.Spread) != 1 || r.Spread[0].Key != api.SpreadMachine || r.Spread[0].MaxSkew < 1 || out[r.Service] {
			continue
		}
		plain := r.Reruled(func(rules *scheduler.Rules) { rules.Spread = nil })
		if shapeable(&plain, shunned) && !live()[r.Service] {
			out[r.Service] = true
		}
	}
	return out
}

// liveServices are the services with a replica on a live machine.
func liveServices(in Input) map[string]bool {
	out := map[string]bool{}
	for _, m := range in.Machines {
		for svc := range m.ServiceCount {
			out[svc] = true
		}
	}
	return out
}

// taughtResidents are a machine's residents but the first PlainResidents,
// which have neither labels nor terms.
func taughtResidents(m *scheduler.Machine) []scheduler.Resident {
	return m.Residents[min(m.PlainResidents, len(m.Residents)):]
}
