package planner

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provider/aws/awscatalog"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/scheduler"
)

// The packing quality suite (issue 15): seeded random workloads, each
// planned from scratch; the plan's cost is compared with its lower bound.
// Unconstrained workloads must stay within 3% of the LP bound in the worst
// case, constrained ones within 15% of a bound that counts the machines
// their rules force. The planner's packing choices were tuned on these
// seeds; BenchmarkPackingQualityHeldOut draws the same kinds of workloads
// from other seeds and reports how far they are (further: see
// BENCHMARKS.md).

const (
	unconstrainedTarget = 0.03
	constrainedTarget   = 0.15
)

// workload is one case of the suite.
type workload struct {
	name    string
	group   *Group
	pending []scheduler.Replica
}

// suiteCatalog is a catalog the suite draws from.
type suiteCatalog struct {
	name  string
	types func() []provisioner.InstanceType
	// capacity is the group's capacity-type policy.
	capacity string
	reserved api.Resources
}

func suiteCatalogs(t testing.TB) []suiteCatalog {
	awsTypes, ok := awscatalog.CatalogFor("us-east-1")
	if !ok {
		t.Fatal("the built-in AWS catalog does not load")
	}
	general := func() []provisioner.InstanceType { return generalPurpose(awsTypes) }
	return []suiteCatalog{
		{name: "proportional-3-families", types: familyCatalog, capacity: api.CapacityAny},
		{name: "proportional-1-family", types: func() []provisioner.InstanceType { return benchCatalog(400) }, capacity: api.CapacityAny},
		{name: "aws-any", types: general, capacity: api.CapacityAny},
		{name: "aws-onDemand", types: general, capacity: api.CapacityOnDemand},
		{name: "aws-spot-reserved", types: general, capacity: api.CapacitySpot,
			reserved: api.Resources{MilliCPU: 100, MemoryBytes: 256 << 20}},
	}
}

// generalPurpose drops GPU types (the workloads ask for none) and the
// burstable t3 types: their price follows memory alone (a t3.micro sells
// 2 vCPU for a fifth of a c5.large's price per vCPU), because those vCPUs
// are a baseline share with credits, which the catalog does not model; as
// full vCPUs they make the LP bound meaningless.
func generalPurpose(types []provisioner.InstanceType) []provisioner.InstanceType {
	var out []provisioner.InstanceType
	for _, it := range types {
		if len(it.GPUs) == 0 && !strings.HasPrefix(it.Name, "t3.") {
			out = append(out, it)
		}
	}
	return out
}

// familyCatalog: compute (2 GiB per vCPU), general (4) and memory (8)
// families in AWS's sizes, priced in proportion to resources, spot at 40%.
func familyCatalog() []provisioner.InstanceType {
	var out []provisioner.InstanceType
	for _, fam := range []struct {
		name      string
		gibPerCPU int64
	}{{"c", 2}, {"m", 4}, {"r", 8}} {
		for _, cpus := range []int64{2, 4, 8, 16, 32, 48, 64, 96} {
			price := 0.02*float64(cpus) + 0.005*float64(cpus*fam.gibPerCPU)
			out = append(out, provisioner.InstanceType{Name: fmt.Sprintf("%s.%d", fam.name, cpus), MilliCPU: cpus * 1000,
				MemoryBytes: cpus * fam.gibPerCPU << 30, Offerings: []provisioner.Offering{
					{Zone: "z1", CapacityType: api.CapacityOnDemand, PricePerHour: price},
					{Zone: "z2", CapacityType: api.CapacityOnDemand, PricePerHour: price},
					{Zone: "z3", CapacityType: api.CapacityOnDemand, PricePerHour: price},
					{Zone: "z1", CapacityType: api.CapacitySpot, PricePerHour: 0.4 * price},
					{Zone: "z2", CapacityType: api.CapacitySpot, PricePerHour: 0.4 * price},
				}})
		}
	}
	return out
}

// shape draws a replica's requests.
type shape struct {
	name string
	draw func(*rand.Rand) api.Resources
}

func discrete(name string, cpus []int64, mems []int64) shape {
	return shape{name: name, draw: func(rng *rand.Rand) api.Resources {
		return api.Resources{MilliCPU: cpus[rng.IntN(len(cpus))], MemoryBytes: mems[rng.IntN(len(mems))] << 20}
	}}
}

func continuous(name string, cpuLo, cpuHi, memLo, memHi int64) shape {
	return shape{name: name, draw: func(rng *rand.Rand) api.Resources {
		return api.Resources{MilliCPU: cpuLo + rng.Int64N(cpuHi-cpuLo+1), MemoryBytes: (memLo + rng.Int64N(memHi-memLo+1)) << 20}
	}}
}

func suiteShapes() []shape {
	return []shape{
		discrete("discrete-balanced", []int64{100, 250, 500, 1000, 1500}, []int64{128, 256, 512, 1024, 2048, 4096}),
		discrete("discrete-cpu-heavy", []int64{250, 500, 1000, 2000, 4000}, []int64{128, 256, 512, 768, 1024, 1536}),
		discrete("discrete-memory-heavy", []int64{50, 100, 200, 250, 500}, []int64{1024, 2048, 3072, 4096, 6144, 8192}),
		continuous("continuous-balanced", 100, 1500, 100, 4096),
		continuous("continuous-cpu-heavy", 500, 4000, 64, 1024),
		continuous("continuous-memory-heavy", 50, 500, 1024, 8192),
	}
}

// rule is a placement constraint the constrained workloads give services.
type rule func(*scheduler.Replica)

func suiteRules() map[string]rule {
	return map[string]rule{
		"zone-spread": func(r *scheduler.Replica) {
			r.Spread = []api.SpreadRule{{Key: api.SpreadZone, MaxSkew: 1}}
		},
		"machine-spread": func(r *scheduler.Replica) {
			r.Spread = []api.SpreadRule{{Key: api.SpreadMachine, MaxSkew: 1}}
		},
		"same-zone": func(r *scheduler.Replica) { r.SameZone = true },
		"anti-affinity": func(r *scheduler.Replica) {
			r.Labels = map[string]string{"app": r.Service}
			r.Terms = &scheduler.Terms{AntiAffinity: []api.AffinityTerm{{Selector: map[string]string{"app": r.Service},
				Topology: api.SpreadMachine, Mode: api.AffinityRequired}}}
		},
	}
}

// makeWorkload draws one case from its seed: catalog, shape, size (1,000
// to 50,000 replicas, log-uniform), services of 5–200 replicas that share
// their requests or (half the cases) draw each replica's own.
func makeWorkload(t testing.TB, seed uint64, ruleNames []string) workload {
	rng := rand.New(rand.NewPCG(seed, 15))
	cats, shapes := suiteCatalogs(t), suiteShapes()
	cat := cats[rng.IntN(len(cats))]
	sh := shapes[rng.IntN(len(shapes))]
	size := int(math.Round(1000 * math.Pow(50, rng.Float64())))
	// Replicas of a service share their requests in Gantry; drawing each
	// its own stands for many small services, which rules (made per
	// service) would not describe.
	perReplica := rng.IntN(2) == 0 && len(ruleNames) == 0
	rules := suiteRules()
	var pending []scheduler.Replica
	for s := 0; len(pending) < size; s++ {
		n := min(5+rng.IntN(196), size-len(pending))
		req := sh.draw(rng)
		var constrain rule
		if len(ruleNames) > 0 {
			constrain = rules[ruleNames[s%len(ruleNames)]]
		}
		svc := fmt.Sprintf("s%d", s)
		for i := 0; i < n; i++ {
			if perReplica {
				req = sh.draw(rng)
			}
			r := scheduler.Replica{ID: fmt.Sprintf("%s-%d", svc, i), Index: i, Requests: req,
				Rules: &scheduler.Rules{Service: svc, Cluster: "c", Runtime: scheduler.RuntimeDocker}}
			if constrain != nil {
				constrain(&r)
			}
			pending = append(pending, r)
		}
	}
	per := "per-service"
	if perReplica {
		per = "per-replica"
	}
	g := &Group{Cluster: "c", ID: "g", MaxSize: 1 << 20, CapacityType: cat.capacity, Runtimes: []string{scheduler.RuntimeDocker},
		Types: cat.types(), Reserved: cat.reserved}
	name := fmt.Sprintf("seed %d: %s, %s %s, %d replicas", seed, cat.name, sh.name, per, size)
	if len(ruleNames) > 0 {
		name += ", " + strings.Join(ruleNames, "+")
	}
	return workload{name: name, group: g, pending: pending}
}

type gapStats struct{ gaps []float64 }

func (s *gapStats) add(g float64) { s.gaps = append(s.gaps, g) }

func (s *gapStats) medianAndWorst() (float64, float64) {
	sorted := slices.Clone(s.gaps)
	slices.Sort(sorted)
	return sorted[len(sorted)/2], sorted[len(sorted)-1]
}

// planned is one workload of the suite, planned and checked.
type planned struct {
	workload
	gap float64
}

// planAll plans the cases from seedBase on and checks what must hold
// whatever the cost: every replica placed, every rule kept, no plan
// cheaper than its bound.
func planAll(tb testing.TB, cases int, seedBase uint64, rules func(i int) []string) ([]planned, gapStats) {
	var out []planned
	var stats gapStats
	for i := 0; i < cases; i++ {
		w := makeWorkload(tb, seedBase+uint64(i), rules(i))
		start := time.Now()
		p := Compute(DefaultConfig(), Input{Groups: []*Group{w.group}, Pending: w.pending, Now: now})
		took := time.Since(start)
		if len(p.Pending) != 0 {
			tb.Fatalf("%s: %d replicas left pending, e.g. %+v", w.name, len(p.Pending), p.Pending[0])
		}
		checkRules(tb, w, p)
		if p.NewCapacityCost < p.LowerBound*(1-1e-9) {
			tb.Fatalf("%s: cost %.4f below the lower bound %.4f: the bound is wrong", w.name, p.NewCapacityCost, p.LowerBound)
		}
		tb.Logf("%s: %d machines, $%.2f/h, bound $%.2f/h, gap %.2f%% (planned in %s)", w.name, len(p.Add), p.NewCapacityCost, p.LowerBound, 100*p.Gap, took.Round(time.Millisecond))
		stats.add(p.Gap)
		out = append(out, planned{workload: w, gap: p.Gap})
	}
	median, worst := stats.medianAndWorst()
	tb.Logf("%d workloads: median gap %.2f%%, worst %.2f%%", cases, 100*median, 100*worst)
	return out, stats
}

func runSuite(t *testing.T, cases int, seedBase uint64, rules func(i int) []string, target float64) {
	if raceDetector {
		// The planner is one goroutine; the detector would only make the
		// suite take minutes. scripts/test.sh runs it without, on its own.
		t.Skip("the packing quality suite runs without the race detector (scripts/test.sh: its own step)")
	}
	results, _ := planAll(t, cases, seedBase, rules)
	for _, r := range results {
		if r.gap > target {
			t.Errorf("%s: gap %.2f%% above the target %.0f%%", r.name, 100*r.gap, 100*target)
		}
	}
}

// TestPackingQualityUnconstrained: 100 workloads without placement rules
// (the second fifty were held out until the planner met the targets on
// them too).
func TestPackingQualityUnconstrained(t *testing.T) {
	for _, base := range []uint64{1000, 5000} {
		t.Run(fmt.Sprintf("seeds-%d", base), func(t *testing.T) {
			runSuite(t, 50, base, func(int) []string { return nil }, unconstrainedTarget)
		})
	}
}

// constrainedKinds are the rules constrained workloads take in turn.
var constrainedKinds = [][]string{{"zone-spread"}, {"machine-spread"}, {"same-zone"}, {"anti-affinity"},
	{"zone-spread", "machine-spread", "same-zone", "anti-affinity"}}

// TestPackingQualityConstrained: 40 workloads whose services carry spread,
// same-zone or anti-affinity rules (one kind, or all four in turn; the
// second twenty were held out like the unconstrained ones).
func TestPackingQualityConstrained(t *testing.T) {
	for _, base := range []uint64{2000, 6000} {
		t.Run(fmt.Sprintf("seeds-%d", base), func(t *testing.T) {
			runSuite(t, 20, base, func(i int) []string { return constrainedKinds[i%len(constrainedKinds)] }, constrainedTarget)
		})
	}
}

// checkRules: every placement rule of the workload holds in the plan.
func checkRules(t testing.TB, w workload, p Plan) {
	t.Helper()
	zone := map[string]string{}
	for _, nm := range p.Add {
		zone[nm.Key] = nm.Zone
	}
	byID := map[string]scheduler.Replica{}
	for _, r := range w.pending {
		byID[r.ID] = r
	}
	type counts struct {
		zones    map[string]int
		machines map[string]int
		rule     scheduler.Replica
	}
	services := map[string]*counts{}
	for _, pl := range p.Placements {
		r := byID[pl.Replica]
		c := services[r.Service]
		if c == nil {
			c = &counts{zones: map[string]int{}, machines: map[string]int{}, rule: r}
			services[r.Service] = c
		}
		c.zones[zone[pl.Machine]]++
		c.machines[pl.Machine]++
	}
	for svc, c := range services {
		r := c.rule
		if selfExclusive(&r) || r.Dedicated {
			for m, n := range c.machines {
				if n > 1 {
					t.Fatalf("%s: %d replicas of %s on %s despite its anti-affinity", w.name, n, svc, m)
				}
			}
		}
		if r.SameZone && len(c.zones) > 1 {
			t.Fatalf("%s: %s is sameZone but runs in %v", w.name, svc, c.zones)
		}
		if s := zoneSkew(&r); s > 0 {
			lo, hi := math.MaxInt, 0
			for _, z := range r.ZoneDomains {
				lo, hi = min(lo, c.zones[z]), max(hi, c.zones[z])
			}
			if hi-lo > s {
				t.Fatalf("%s: %s spreads %v over zones %v (maxSkew %d)", w.name, svc, c.zones, r.ZoneDomains, s)
			}
		}
	}
}

// BenchmarkPackingQualityHeldOut plans 70 workloads drawn like the suite's
// but from seeds the planner was never tuned on (the third draw: the
// second joined the suite once it met the targets), and reports their
// median and worst gaps (the suite's targets are not asserted here: these
// are the figures to watch).
func BenchmarkPackingQualityHeldOut(b *testing.B) { benchDraw(b, 7000, 8000) }

// benchDraw plans 50 unconstrained workloads from freeBase on and 20
// constrained ones from ruledBase on, and reports their median and worst
// gaps.
func benchDraw(b *testing.B, freeBase, ruledBase uint64) {
	for b.Loop() {
		_, free := planAll(b, 50, freeBase, func(int) []string { return nil })
		_, ruled := planAll(b, 20, ruledBase, func(i int) []string { return constrainedKinds[i%len(constrainedKinds)] })
		fm, fw := free.medianAndWorst()
		rm, rw := ruled.medianAndWorst()
		b.ReportMetric(100*fm, "unconstrained-median-gap-%")
		b.ReportMetric(100*fw, "unconstrained-worst-gap-%")
		b.ReportMetric(100*rm, "constrained-median-gap-%")
		b.ReportMetric(100*rw, "constrained-worst-gap-%")
	}
}

// TestPackingQualityMachineSpreadAlone: the held-out workload of machine
// spread alone (seed 8006: 95 services of up to 200 replicas, three
// families priced in proportion) was 32.9% above its bound with the
// scheduler's spread placement; dealt over an LP fleet when that is
// cheaper, it meets the constrained target (issue 32).
func TestPackingQualityMachineSpreadAlone(t *testing.T) {
	if raceDetector {
		t.Skip("the packing quality suite runs without the race detector (scripts/test.sh: its own step)")
	}
	results, _ := planAll(t, 1, 8006, func(int) []string { return []string{"machine-spread"} })
	if results[0].gap > constrainedTarget {
		t.Errorf("%s: gap %.2f%% above the target %.0f%%", results[0].name, 100*results[0].gap, 100*constrainedTarget)
	}
}

// TestConfigurationBoundConverges: held-out seed 7046 (11,844 replicas of
// 28 shapes on AWS spot types) reported 4.29% because the configuration
// bound's column generation stopped after 40 rounds far from its end (a
// replica per configuration to start, knapsacks on small types cut short
// with ceilings a quarter too high). Started from the plan's own machines
// and priced exactly, it proves the plan within 0.45% (issue 32).
func TestConfigurationBoundConverges(t *testing.T) {
	if raceDetector {
		t.Skip("the packing quality suite runs without the race detector (scripts/test.sh: its own step)")
	}
	results, _ := planAll(t, 1, 7046, func(int) []string { return nil })
	if results[0].gap > 0.01 {
		t.Errorf("%s: gap %.2f%%: the configuration bound did not converge", results[0].name, 100*results[0].gap)
	}
}

// TestPackingQualityEveryRule: 20,000 replicas with every kind of rule on
// 400 types (BenchmarkPlan20kEveryRule's workload: the mix's five kinds,
// a tier kept apart across ten services and ten services kept apart from
// themselves) keep their rules and plan within the constrained target
// (issue 32).
func TestPackingQualityEveryRule(t *testing.T) {
	if raceDetector {
		t.Skip("the packing quality suite runs without the race detector (scripts/test.sh: its own step)")
	}
	pending := everyRuleReplicas(20000)
	p := Compute(DefaultConfig(), Input{Groups: []*Group{benchGroup()}, Pending: pending, Now: now})
	if len(p.Pending) != 0 {
		t.Fatalf("%d replicas left pending, e.g. %+v", len(p.Pending), p.Pending[0])
	}
	keepsRules(t, "every rule, 20,000 replicas", pending, p)
	if p.NewCapacityCost < p.LowerBound*(1-1e-9) {
		t.Fatalf("cost %.4f below the lower bound %.4f", p.NewCapacityCost, p.LowerBound)
	}
	t.Logf("%d machines, $%.2f/h, bound $%.2f/h, gap %.2f%%", len(p.Add), p.NewCapacityCost, p.LowerBound, 100*p.Gap)
	if p.Gap > constrainedTarget {
		t.Errorf("gap %.2f%% above the target %.0f%%", 100*p.Gap, 100*constrainedTarget)
	}
}

// TestPackingQualityTierBesideOthers: 1,000 replicas kept apart as a tier
// beside 4,000 of the mix's plain, spread and zone kinds
// (BenchmarkPlanTierApart/apart=1000). The tier's machines are opened for
// one replica each and the plain ones packed by mix elsewhere; moved into
// the room the tier's machines pay for (downsize), the plan meets the
// constrained target (18.4% without).
func TestPackingQualityTierBesideOthers(t *testing.T) {
	if raceDetector {
		t.Skip("the packing quality suite runs without the race detector (scripts/test.sh: its own step)")
	}
	pending := append(tierReplicas(1000, 20), benchReplicas(4000, mixPlain, mixZoneSpread, mixMachineSpread, mixSameZone)...)
	p := Compute(DefaultConfig(), Input{Groups: []*Group{benchGroup()}, Pending: pending, Now: now})
	if len(p.Pending) != 0 {
		t.Fatalf("%d replicas left pending, e.g. %+v", len(p.Pending), p.Pending[0])
	}
	keepsRules(t, "a tier beside others", pending, p)
	t.Logf("%d machines, $%.2f/h, bound $%.2f/h, gap %.2f%%", len(p.Add), p.NewCapacityCost, p.LowerBound, 100*p.Gap)
	if p.Gap > constrainedTarget {
		t.Errorf("gap %.2f%% above the target %.0f%%", 100*p.Gap, 100*constrainedTarget)
	}
}

// BenchmarkPackingQualityFourthDraw is issue 32's new held-out draw: 50
// unconstrained and 20 constrained workloads drawn like the suite's from
// seeds never planned before this draw was run (9000 on, 9500 on), run
// once when the work was done and reported as is (BENCHMARKS.md).
func BenchmarkPackingQualityFourthDraw(b *testing.B) { benchDraw(b, 9000, 9500) }
