package planner

import (
	"fmt"
	"math"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/scheduler"
)

// exclusiveReplicas carry app=svc and keep one per machine.
func exclusiveReplicas(svc string, n int, milliCPU int64) []scheduler.Replica {
	rs := replicas(svc, n, milliCPU)
	for i := range rs {
		rs[i].Labels = map[string]string{"app": svc}
		rs[i].Terms = &scheduler.Terms{AntiAffinity: []api.AffinityTerm{{Selector: map[string]string{"app": svc},
			Topology: api.SpreadMachine, Mode: api.AffinityRequired}}}
	}
	return rs
}

func pricedType(name string, milliCPU, memGiB int64, price float64) provisioner.InstanceType {
	return provisioner.InstanceType{Name: name, MilliCPU: milliCPU, MemoryBytes: memGiB << 30,
		Offerings: []provisioner.Offering{{Zone: "a", CapacityType: api.CapacityOnDemand, PricePerHour: price}}}
}

// A service of 20 replicas that keep apart forces 20 machines; eight
// small services of the same kind are dealt over those 20, so every
// machine stays the smallest size (the ordinary opener put all eight on
// the first two machines and bought larger types for them).
func TestExclusiveServicesAreDealtOverTheForcedMachines(t *testing.T) {
	g := group("g", 0, 0, 100, itype(2), itype(4), itype(8), itype(16))
	pending := exclusiveReplicas("big", 20, 500)
	for s := 0; s < 8; s++ {
		pending = append(pending, exclusiveReplicas(fmt.Sprintf("small%d", s), 2, 500)...)
	}
	p := Compute(DefaultConfig(), Input{Groups: []*Group{g}, Pending: pending, Now: now})
	if len(p.Pending) != 0 {
		t.Fatalf("left pending: %+v", p.Pending)
	}
	checkRules(t, workload{name: "dealt", group: g, pending: pending}, p)
	if len(p.Add) != 20 || math.Abs(p.NewCapacityCost-0.40) > 1e-9 {
		t.Fatalf("want 20 t2 machines for $0.40/h, got %d for $%.2f/h: %+v", len(p.Add), p.NewCapacityCost, p.Add)
	}
}

// No machine holds more than one replica of each exclusive service, so a
// type larger than that is worth no more than that to the bound: two
// services of ten 1-vCPU replicas on a 16-vCPU type cheaper per vCPU than
// the 1-vCPU type need twenty 1-vCPU machines, and the bound says so
// (without the cap it was $0.16/h, a plan that does not exist).
func TestBoundCapsMachinesAtOneReplicaPerExclusiveService(t *testing.T) {
	g := group("g", 0, 0, 100, pricedType("small", 1000, 2, 0.01), pricedType("large", 16000, 32, 0.10))
	pending := append(exclusiveReplicas("a", 10, 1000), exclusiveReplicas("b", 10, 1000)...)
	p := Compute(DefaultConfig(), Input{Groups: []*Group{g}, Pending: pending, Now: now})
	if len(p.Pending) != 0 {
		t.Fatalf("left pending: %+v", p.Pending)
	}
	if math.Abs(p.LowerBound-0.20) > 1e-6 || math.Abs(p.NewCapacityCost-0.20) > 1e-9 {
		t.Fatalf("want plan and bound $0.20/h, got plan $%.4f/h, bound $%.4f/h", p.NewCapacityCost, p.LowerBound)
	}
}

// Replicas larger than half the cheapest type cannot share its machines;
// with too few small replicas to fill the other halves, some go to a
// larger type that holds three of them.
func TestLargeReplicasMoveToATypeThatHoldsSeveral(t *testing.T) {
	narrow := pricedType("narrow", 8000, 16, 0.119)
	wide := pricedType("wide", 16000, 64, 0.2688)
	g := group("g", 0, 0, 100, narrow, wide)
	pending := append(replicas("large", 30, 4500), replicas("small", 10, 1000)...)
	p := Compute(DefaultConfig(), Input{Groups: []*Group{g}, Pending: pending, Now: now})
	if len(p.Pending) != 0 {
		t.Fatalf("left pending: %+v", p.Pending)
	}
	checkNewMachinesHold(t, p, pending, g)
	wides := 0
	for _, nm := range p.Add {
		if nm.InstanceType == "wide" {
			wides++
		}
	}
	// One large replica per narrow machine costs 30 × $0.119 = $3.57/h.
	if wides == 0 || p.NewCapacityCost > 3.2 {
		t.Fatalf("want some wide machines and less than $3.20/h, got %d wide for $%.3f/h", wides, p.NewCapacityCost)
	}
}

// Only a service whose anti-affinity selects itself alone, and which no
// other service's term selects, is packed as exclusive; the others keep
// the scheduler's general rules.
func TestExclusiveServicesAreOnlyThoseThatShunThemselves(t *testing.T) {
	pending := append(exclusiveReplicas("alone", 2, 500), exclusiveReplicas("db", 2, 500)...)
	web := exclusiveReplicas("web", 2, 500)
	for i := range web {
		web[i].Terms.AntiAffinity = append(web[i].Terms.AntiAffinity, api.AffinityTerm{Selector: map[string]string{"app": "db"},
			Topology: api.SpreadMachine, Mode: api.AffinityRequired})
	}
	cache := exclusiveReplicas("cache", 2, 500)
	for i := range cache {
		cache[i].Terms.Affinity = []api.AffinityTerm{{Selector: map[string]string{"app": "alone"}, Topology: api.SpreadZone, Mode: api.AffinityPreferred, Weight: 1}}
	}
	pending = append(append(pending, web...), cache...)
	in := Input{Pending: pending}
	_, anyTerms := shunnedServices(in)
	got := exclusiveServices(in, anyTerms)
	if !got["alone"] || got["db"] || got["web"] || got["cache"] || len(got) != 1 {
		t.Fatalf("want only alone exclusive, got %v", got)
	}
}

// A service of twelve replicas that keep apart forces twelve machines;
// services whose only rule is a machine spread, of no more replicas, are
// dealt with it, one replica of each per machine, over the mix's machines:
// twenty 2-vCPU machines (half a vCPU of each reserved) holding three
// replicas each, $0.40/h. The ordinary opener placed the spread services
// first and bought twelve 4-vCPU machines, $0.48/h.
func TestSpreadServicesAreDealtBesideExclusiveOnes(t *testing.T) {
	g := group("g", 0, 0, 100, itype(2), itype(4), itype(8), itype(16))
	g.Reserved = api.Resources{MilliCPU: 500}
	pending := exclusiveReplicas("apart", 12, 500)
	for s := range 4 {
		rs := replicas(fmt.Sprintf("s%d", s), 12, 500)
		for i := range rs {
			rs[i].Spread = []api.SpreadRule{{Key: api.SpreadMachine, MaxSkew: 1}}
		}
		pending = append(pending, rs...)
	}
	p := Compute(DefaultConfig(), Input{Groups: []*Group{g}, Pending: pending, Now: now})
	if len(p.Pending) != 0 {
		t.Fatalf("left pending: %+v", p.Pending)
	}
	if p.NewCapacityCost > 0.40+1e-9 {
		t.Fatalf("want at most $0.40/h, got $%.2f/h on %d machines", p.NewCapacityCost, len(p.Add))
	}
	service := map[string]string{}
	for _, r := range pending {
		service[r.ID] = r.Service
	}
	counts := map[string]map[string]int{}
	for _, pl := range p.Placements {
		if counts[service[pl.Replica]] == nil {
			counts[service[pl.Replica]] = map[string]int{}
		}
		counts[service[pl.Replica]][pl.Machine]++
	}
	for svc, on := range counts {
		lo, hi := math.MaxInt, 0
		for _, nm := range p.Add {
			lo, hi = min(lo, on[nm.Key]), max(hi, on[nm.Key])
		}
		if hi-lo > 1 {
			t.Fatalf("%s skews by %d over the plan's machines: %v", svc, hi-lo, on)
		}
	}
}
