package planner

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/scheduler"
)

// smallRuledWorkload draws a few services, each plain, kept apart on
// machines from a tier (tier=a, whether or not it carries the label),
// kept apart from itself, or spread over machines or zones.
func smallRuledWorkload(rng *rand.Rand) []scheduler.Replica {
	var out []scheduler.Replica
	for s := range 1 + rng.IntN(6) {
		svc := fmt.Sprintf("s%d", s)
		rules := &scheduler.Rules{Service: svc, Cluster: "c", Runtime: scheduler.RuntimeProcess}
		switch rng.IntN(5) {
		case 0:
			keepApart(rules, map[string]string{"tier": "a"})
		case 1:
			keepApart(rules, map[string]string{"app": svc})
		case 2:
			rules.Spread = []api.SpreadRule{{Key: api.SpreadMachine, MaxSkew: 1 + rng.IntN(2)}}
		case 3:
			rules.Spread = []api.SpreadRule{{Key: api.SpreadZone, MaxSkew: 1}}
			rules.ZoneDomains = []string{"a", "b"}
		}
		req := api.Resources{MilliCPU: int64(250 * (1 + rng.IntN(3))), MemoryBytes: int64(256*(1+rng.IntN(6))) << 20} // each fits the smallest type
		for i := range 1 + rng.IntN(8) {
			out = append(out, scheduler.Replica{ID: fmt.Sprintf("%s-%d", svc, i), Index: i, Requests: req, Rules: rules})
		}
	}
	return out
}

// keepApart gives the rules the label and a required anti-affinity on
// machine to it.
func keepApart(rules *scheduler.Rules, label map[string]string) {
	rules.Labels = label
	rules.Terms = &scheduler.Terms{AntiAffinity: []api.AffinityTerm{{Selector: label, Topology: api.SpreadMachine, Mode: api.AffinityRequired}}}
}

// For random small workloads with anti-affinity (across services and to
// themselves) and spreads, the plan places every replica, keeps every
// rule, and never costs less than its bound.
func TestPlansKeepAntiAffinityAndSpread(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 32))
		types := []provisioner.InstanceType{itype(1), itype(2), itype(4), itype(8)}[:1+rng.IntN(4)]
		pending := smallRuledWorkload(rng)
		p := Compute(DefaultConfig(), Input{Groups: []*Group{group("g", 0, 0, 100, types...)}, Pending: pending, Now: now})
		what := fmt.Sprintf("seed %d (%d replicas, %d types)", seed, len(pending), len(types))
		if len(p.Pending) != 0 {
			t.Fatalf("%s: %d left pending, e.g. %+v", what, len(p.Pending), p.Pending)
		}
		if p.NewCapacityCost < p.LowerBound*(1-1e-9) {
			t.Fatalf("%s: cost %.4f below the bound %.4f", what, p.NewCapacityCost, p.LowerBound)
		}
		keepsRules(t, what, pending, p)
	}
}

// keepsRules checks a plan of new machines against the replicas' rules:
// required anti-affinity on machine (either way round) and zone spread
// over the zones.
func keepsRules(t *testing.T, what string, pending []scheduler.Replica, p Plan) {
	t.Helper()
	byID := map[string]scheduler.Replica{}
	for _, r := range pending {
		byID[r.ID] = r
	}
	zoneOf := map[string]string{}
	for _, nm := range p.Add {
		zoneOf[nm.Key] = nm.Zone
	}
	onMachine := map[string][]scheduler.Replica{}
	perZone := map[string]map[string]int{}
	for _, pl := range p.Placements {
		r := byID[pl.Replica]
		onMachine[pl.Machine] = append(onMachine[pl.Machine], r)
		if perZone[r.Service] == nil {
			perZone[r.Service] = map[string]int{}
		}
		perZone[r.Service][zoneOf[pl.Machine]]++
	}
	for m, rs := range onMachine {
		if a, b, broken := scheduler.KeptApartBroken(rs); broken {
			t.Fatalf("%s: %s and %s share %s, but %s keeps apart from them", what, a.ID, b.ID, m, a.ID)
		}
	}
	for svc := range perZone {
		var r scheduler.Replica
		for _, x := range pending {
			if x.Service == svc {
				r = x
				break
			}
		}
		for _, rule := range r.Spread {
			lo, hi := len(pending), 0
			if rule.Key != api.SpreadZone {
				// A machine spread holds when each replica is placed, as in
				// Kubernetes: a machine opened later for other services
				// (empty of this one) does not break it.
				continue
			}
			for _, z := range r.ZoneDomains {
				lo, hi = min(lo, perZone[svc][z]), max(hi, perZone[svc][z])
			}
			if hi-lo > rule.MaxSkew {
				t.Fatalf("%s: %s spreads %d to %d per %s (maxSkew %d)", what, svc, lo, hi, rule.Key, rule.MaxSkew)
			}
		}
	}
}
