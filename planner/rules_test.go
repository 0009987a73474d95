package planner

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/scheduler"
)

// The replicas of one service share their rules (decide builds them once
// per revision); a plan that needs other rules for some of them (zone
// domains widened, spread or terms set aside while packing) makes its own
// copy and leaves the shared ones as they were.
func TestPlanLeavesSharedRulesAlone(t *testing.T) {
	pending := benchReplicas(2000, mixPlain, mixZoneSpread, mixMachineSpread, mixSameZone, mixDedicated)
	// A zone spread of large replicas, over fewer zones than the groups
	// offer: widened, and packed largest first.
	for i, w := range replicas("wide", 7, 5000) {
		w.Requests.MemoryBytes = int64(3+i) << 30
		w.Runtime = scheduler.RuntimeDocker
		w.Spread = []api.SpreadRule{{Key: api.SpreadZone, MaxSkew: 1}}
		w.ZoneDomains = []string{"z1"}
		pending = append(pending, w)
	}
	pending = shareRulesByService(pending)
	for i := range pending {
		if pending[i].Index == 0 && len(pending[i].Spread) == 0 && !pending[i].Dedicated && !pending[i].SameZone {
			pending[i].Rules.Labels = map[string]string{"tier": "db"}
			pending[i].Rules.Terms = &scheduler.Terms{AntiAffinity: []api.AffinityTerm{{
				Selector: map[string]string{"tier": "db"}, Topology: api.SpreadMachine}}}
		}
	}
	residents := shareRulesByService(replicas("old", 3, 500))
	g := benchGroup()
	old := joined("old-machine", g.ID, itypeNamed(g, "c8"), 48*time.Hour, residents...)
	before := rulesJSON(t, append(append([]scheduler.Replica{}, pending...), residents...))

	plan := Compute(DefaultConfig(), Input{Groups: []*Group{g}, Machines: []*Machine{old}, Pending: pending, Now: now})
	if len(plan.Add) == 0 {
		t.Fatalf("planned no machine for %d replicas", len(pending))
	}
	after := rulesJSON(t, append(append([]scheduler.Replica{}, pending...), residents...))
	for rules, was := range before {
		if after[rules] != was {
			t.Fatalf("the plan changed the shared rules of %s:\nbefore %s\nafter  %s", rules.Service, was, after[rules])
		}
	}
}

// shareRulesByService gives every replica of a service the first one's
// rules, as decide does.
func shareRulesByService(rs []scheduler.Replica) []scheduler.Replica {
	first := map[string]*scheduler.Rules{}
	for i := range rs {
		if shared, ok := first[rs[i].Service]; ok {
			rs[i].Rules = shared
			continue
		}
		first[rs[i].Service] = rs[i].Rules
	}
	return rs
}

func rulesJSON(t *testing.T, rs []scheduler.Replica) map[*scheduler.Rules]string {
	t.Helper()
	out := map[*scheduler.Rules]string{}
	for _, r := range rs {
		b, err := json.Marshal(r.Rules)
		if err != nil {
			t.Fatal(err)
		}
		out[r.Rules] = string(b)
	}
	return out
}
