package planner

import (
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/scheduler"
)

// lowerBound is, per cluster, the LP relaxation of buying capacity for the
// replicas the plan put on new machines: fractional machines of any
// allowed instance type at its cheapest allowed offering, covering their
// CPU, memory, ephemeral storage and GPUs — and what their rules force on
// any plan: at least as many machines as the largest group of replicas
// that keep apart (apartGroup: a dedicated service, or a required
// anti-affinity on machine whose selector selects the replicas that
// carry it, one service's or a tier's), as many of them as large as each
// of that group's requests as it has replicas asking that much or more,
// and in every zone of a zone spread the replicas the
// skew forces there, bought from that zone's offerings. No real plan can
// cost less.
func (p *planning) lowerBound(plan *Plan) float64 {
	byID := make(map[string]scheduler.Replica, len(p.in.Pending))
	for _, r := range p.in.Pending {
		byID[r.ID] = r
	}
	gpus := make(map[string]int, len(plan.Placements))
	for _, pl := range plan.Placements {
		gpus[pl.Replica] = len(pl.GPUs)
	}
	onNew := map[string][]scheduler.Replica{}
	machines := map[string][]plannedMachine{}
	var clusters []string
	for _, nm := range plan.Add {
		planned := plannedMachine{itype: nm.InstanceType, replicas: make([]int, 0, len(nm.Replicas))}
		for _, id := range nm.Replicas {
			r, ok := byID[id]
			if !ok { // a resident moved by a replacement: only its GPUs count
				r = scheduler.Replica{ID: id, Rules: &scheduler.Rules{}}
			}
			r.Requests.GPUs = gpus[id]
			if _, ok := onNew[nm.Cluster]; !ok {
				clusters = append(clusters, nm.Cluster)
			}
			planned.replicas = append(planned.replicas, len(onNew[nm.Cluster]))
			onNew[nm.Cluster] = append(onNew[nm.Cluster], r)
		}
		machines[nm.Cluster] = append(machines[nm.Cluster], planned)
	}
	// Walking every machine's services for a few spread services on new
	// machines took a tenth of a pass at 50,000 machines: only when asked.
	live := sync.OnceValue(func() map[string]bool { return p.servicesOnLiveMachines(plan) })
	total := 0.0
	for _, cluster := range clusters {
		total += p.clusterBound(cluster, onNew[cluster], machines[cluster], live)
	}
	return total
}

// servicesOnLiveMachines: services with a replica on a machine that exists
// (running or placed there by the plan); their zone spread counts those.
func (p *planning) servicesOnLiveMachines(plan *Plan) map[string]bool {
	out := liveServices(p.in)
	isNew := map[string]bool{}
	for _, nm := range plan.Add {
		isNew[nm.Key] = true
	}
	service := map[string]string{}
	for _, r := range p.in.Pending {
		service[r.ID] = r.Service
	}
	for _, pl := range plan.Placements {
		if !isNew[pl.Machine] {
			out[service[pl.Replica]] = true
		}
	}
	return out
}

// plannedMachine is a machine the plan adds: its type and the replicas it
// holds (indexes into its cluster's replicas).
type plannedMachine struct {
	itype    string
	replicas []int
}

func (p *planning) clusterBound(cluster string, rs []scheduler.Replica, planned []plannedMachine, live func() map[string]bool) float64 {
	demand := totalDemand(rs) // Requests.GPUs holds the devices placed
	forcedZones := forcedZoneDemand(rs, live)
	cols := p.typeColumns(cluster)
	if len(forcedZones) > 0 {
		cols = p.zoneColumns(cluster)
	}
	grain := requestGrain(rs)
	for i := range cols {
		cols[i].alloc = grain.floor(cols[i].alloc)
	}
	groups := apartGroups(rs)
	if most, ok := mostOnOneMachine(rs, groups); ok {
		for i := range cols {
			cols[i].alloc = minResources(cols[i].alloc, most)
		}
	}
	var need []float64
	supply := make([][]float64, len(cols))
	prices := make([]float64, len(cols))
	for i, c := range cols {
		prices[i] = c.price
	}
	addRow := func(amount float64, of func(column) float64) {
		need = append(need, amount)
		for i, c := range cols {
			supply[i] = append(supply[i], of(c))
		}
	}
	for _, d := range resourceDims {
		if d(demand) > 0 {
			addRow(d(demand), func(c column) float64 { return d(c.alloc) })
		}
	}
	zones := make([]string, 0, len(forcedZones))
	for z := range forcedZones {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	for _, z := range zones {
		for _, d := range resourceDims {
			if amount := d(forcedZones[z]); amount > 0 {
				addRow(amount, func(c column) float64 {
					if c.zone != z {
						return 0
					}
					return d(c.alloc)
				})
			}
		}
	}
	if len(groups) > 0 { // the largest group: each a machine of its own
		addRow(float64(len(groups[0])), func(column) float64 { return 1 })
	}
	apartNeed, apartShapes := apartRows(rs, groups)
	for k, q := range apartShapes {
		addRow(float64(apartNeed[k]), func(c column) float64 {
			if c.alloc.Fits(q) {
				return 1
			}
			return 0
		})
	}
	cost, _ := coverLP(need, supply, prices)
	if len(forcedZones) == 0 {
		if configured, ok := p.configurationBound(cluster, rs, planned, cost); ok && configured > cost {
			cost = configured
		}
	}
	return cost
}

// mostOnOneMachine is the most any machine can hold of rs when some keep
// apart (groups: apartGroups): the largest replica of each group plus
// all the others. ok is false when none do (the machine's size is the
// only limit).
func mostOnOneMachine(rs []scheduler.Replica, groups [][]int) (api.Resources, bool) {
	if len(groups) == 0 {
		return api.Resources{}, false
	}
	member := make([]bool, len(rs))
	var most api.Resources
	for _, g := range groups {
		var largest api.Resources
		for _, i := range g {
			member[i] = true
			largest = maxResources(largest, rs[i].Requests)
		}
		most = most.Add(largest)
	}
	for i := range rs {
		if !member[i] {
			most = most.Add(rs[i].Requests)
		}
	}
	return most, true
}

// forcedZoneDemand: for each service with a zone spread and no replica on
// live machines, n replicas over Z zones with maxSkew s put at least
// ⌈(n − (Z−1)·s)/Z⌉ in every zone; what they need at the least (the
// smallest requests, each resource on its own) must be bought in that
// zone.
func forcedZoneDemand(rs []scheduler.Replica, live func() map[string]bool) map[string]api.Resources {
	byService := map[string][]scheduler.Replica{}
	for _, r := range rs {
		if zoneSkew(&r) > 0 && len(r.ZoneDomains) > 1 && !live()[r.Service] {
			byService[r.Service] = append(byService[r.Service], r)
		}
	}
	out := map[string]api.Resources{}
	for _, group := range byService {
		zones, skew := group[0].ZoneDomains, zoneSkew(&group[0])
		n, z := len(group), len(zones)
		k := int(math.Ceil(float64(n-(z-1)*skew) / float64(z)))
		if k <= 0 {
			continue
		}
		least := smallestRequests(group, k)
		for _, zone := range zones {
			out[zone] = out[zone].Add(least)
		}
	}
	return out
}

func zoneSkew(r *scheduler.Replica) int {
	for _, s := range r.Spread {
		if s.Key == api.SpreadZone {
			return s.MaxSkew
		}
	}
	return 0
}

// smallestRequests sums, for each resource on its own, the k smallest
// requests of the group.
func smallestRequests(group []scheduler.Replica, k int) api.Resources {
	sum := func(of func(api.Resources) int64) int64 {
		vals := make([]int64, len(group))
		for i, r := range group {
			vals[i] = of(r.Requests)
		}
		slices.Sort(vals)
		var s int64
		for _, v := range vals[:k] {
			s += v
		}
		return s
	}
	return api.Resources{
		MilliCPU:       sum(func(r api.Resources) int64 { return r.MilliCPU }),
		MemoryBytes:    sum(func(r api.Resources) int64 { return r.MemoryBytes }),
		EphemeralBytes: sum(func(r api.Resources) int64 { return r.EphemeralBytes }),
	}
}

// zoneColumns: per instance type and zone, the most generous allocatable
// and the cheapest allowed offering price there.
func (p *planning) zoneColumns(cluster string) []column { return p.columns(cluster, true) }

func maxResources(a, b api.Resources) api.Resources {
	return api.Resources{MilliCPU: max(a.MilliCPU, b.MilliCPU), MemoryBytes: max(a.MemoryBytes, b.MemoryBytes),
		EphemeralBytes: max(a.EphemeralBytes, b.EphemeralBytes), GPUs: max(a.GPUs, b.GPUs)}
}

// grain is the greatest common divisor of the replicas' CPU requests and of
// their memory requests: what a machine holds of either is a multiple of
// it, so the part of a machine's allocatable below the next multiple is
// of no use to any plan (7,900m of CPU holds at most 7,750m of replicas
// that all ask multiples of 250m).
type grain struct{ milliCPU, memoryBytes int64 }

func requestGrain(rs []scheduler.Replica) grain {
	var g grain
	for _, r := range rs {
		g.milliCPU = gcd(g.milliCPU, r.Requests.MilliCPU)
		g.memoryBytes = gcd(g.memoryBytes, r.Requests.MemoryBytes)
	}
	return g
}

// floor rounds the allocatable down to the grain.
func (g grain) floor(alloc api.Resources) api.Resources {
	if g.milliCPU > 0 {
		alloc.MilliCPU -= alloc.MilliCPU % g.milliCPU
	}
	if g.memoryBytes > 0 {
		alloc.MemoryBytes -= alloc.MemoryBytes % g.memoryBytes
	}
	return alloc
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
