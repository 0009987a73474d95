package planner

import "testing"

// The benchmarks' quality claims, checked on every test run: the 20,000
// replica mix is fully placed, and the plain part costs within 5% of its
// LP lower bound.
func TestBenchmarkMixQuality(t *testing.T) {
	mix := Compute(DefaultConfig(), Input{Groups: []*Group{benchGroup()},
		Pending: benchReplicas(20000, mixPlain, mixZoneSpread, mixMachineSpread, mixSameZone, mixDedicated), Now: now})
	if len(mix.Pending) != 0 {
		t.Fatalf("%d replicas of the mix left pending, e.g. %+v", len(mix.Pending), mix.Pending[0])
	}
	if mix.NewCapacityCost < mix.LowerBound {
		t.Fatalf("cost %.2f below the lower bound %.2f", mix.NewCapacityCost, mix.LowerBound)
	}
	plain := Compute(DefaultConfig(), Input{Groups: []*Group{benchGroup()}, Pending: benchReplicas(4000, mixPlain), Now: now})
	if len(plain.Pending) != 0 || plain.Gap > 0.05 {
		t.Fatalf("plain: %d pending, gap %.2f%% (want ≤ 5%%)", len(plain.Pending), 100*plain.Gap)
	}
}
