package planner

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/scheduler"
)

// dbReplicas carry app=db and keep one per machine.
func dbReplicas(n int) []scheduler.Replica {
	rs := replicas("db", n, 500)
	for i := range rs {
		rs[i].Labels = map[string]string{"app": "db"}
		rs[i].Terms = &scheduler.Terms{AntiAffinity: []api.AffinityTerm{{Selector: map[string]string{"app": "db"}, Topology: api.SpreadMachine, Mode: api.AffinityRequired}}}
	}
	return rs
}

// The planner opens as many machines as a required anti-affinity forces
// (4 replicas that would share one machine need 4), and prices them.
func TestPlannerOpensTheMachinesAntiAffinityForces(t *testing.T) {
	g := group("g", 0, 0, 10, itype(8))
	free := Compute(DefaultConfig(), Input{Groups: []*Group{g}, Pending: replicas("db", 4, 500), Now: now})
	spread := Compute(DefaultConfig(), Input{Groups: []*Group{g}, Pending: dbReplicas(4), Now: now})
	if len(free.Add) != 1 || len(spread.Add) != 4 || len(spread.Pending) != 0 {
		t.Fatalf("want 1 machine without the rule and 4 with it: %d and %d (%+v)", len(free.Add), len(spread.Add), spread.Pending)
	}
	seen := map[string]bool{}
	for _, p := range spread.Placements {
		if seen[p.Machine] {
			t.Fatalf("two db replicas planned on %s", p.Machine)
		}
		seen[p.Machine] = true
	}
}

// Consolidation never makes a move that breaks a required anti-affinity:
// two nearly empty machines, one db replica each, both stay.
func TestConsolidationKeepsAntiAffinity(t *testing.T) {
	g := group("g", 2, 0, 5, itype(4))
	rs := dbReplicas(2)
	ms := []*Machine{joined("m1", "g", itype(4), time.Hour, rs[0]), joined("m2", "g", itype(4), time.Hour, rs[1])}
	for i, m := range ms {
		m.Residents = []scheduler.Resident{{Replica: &rs[i]}}
	}
	if p := Compute(DefaultConfig(), Input{Groups: []*Group{g}, Machines: ms, Now: now}); len(p.Remove) != 0 {
		t.Fatalf("consolidation broke the anti-affinity: %+v", p.Remove)
	}
	plain := replicas("web", 2, 500)
	ms = []*Machine{joined("m1", "g", itype(4), time.Hour, plain[0]), joined("m2", "g", itype(4), time.Hour, plain[1])}
	if p := Compute(DefaultConfig(), Input{Groups: []*Group{g}, Machines: ms, Now: now}); len(p.Remove) != 1 {
		t.Fatalf("without the rule one machine goes: %+v", p.Remove)
	}
}

// Compaction knows every pending replica's labels: it never moves a
// replica that keeps away from app=db onto a db machine (it used to, when
// its what-if session knew only the labels of the replicas it moved).
func TestCompactionKeepsCrossServiceAntiAffinity(t *testing.T) {
	awayFromDB := &scheduler.Terms{AntiAffinity: []api.AffinityTerm{{Selector: map[string]string{"app": "db"}, Topology: api.SpreadMachine, Mode: api.AffinityRequired}}}
	cache := replicas("cache", 1, 250)
	cache[0].Labels, cache[0].Terms = map[string]string{"app": "cache"}, awayFromDB
	web := replicas("web", 2, 250)
	for i := range web {
		web[i].Terms = &scheduler.Terms{AntiAffinity: awayFromDB.AntiAffinity,
			Affinity: []api.AffinityTerm{{Selector: map[string]string{"app": "cache"}, Topology: api.SpreadMachine, Mode: api.AffinityRequired}}}
	}
	pending := append(append(dbReplicas(3), cache...), web...)
	p := Compute(DefaultConfig(), Input{Groups: []*Group{group("g", 0, 1, 4, itype(2))}, Pending: pending, Now: now})
	if len(p.Add) != 4 || len(p.Pending) != 0 {
		t.Fatalf("want the 4 machines the rules force: %+v, pending %+v", p.Add, p.Pending)
	}
	dbOn := map[string]bool{}
	for _, pl := range p.Placements {
		if strings.HasPrefix(pl.Replica, "db-") {
			dbOn[pl.Machine] = true
		}
	}
	for _, pl := range p.Placements {
		if !strings.HasPrefix(pl.Replica, "db-") && dbOn[pl.Machine] {
			t.Fatalf("%s planned next to a db replica on %s: %+v", pl.Replica, pl.Machine, p.Placements)
		}
	}
}

// A tier kept apart across services (every replica labelled tier=front,
// each keeping apart from tier=front on machines) forces a machine per
// replica, however small, and the bound counts them: on a catalog whose
// smallest machines are far larger than the replicas, a plan of one
// machine each is optimal and reports a gap near 0 (it reported 97%:
// the bound counted the machines each service forces, 1 in 20).
func TestBoundCountsTheMachinesATierForces(t *testing.T) {
	g := group("g", 0, 0, 1000, []provisioner.InstanceType{itype(2), itype(4), itype(8)}...)
	tier := map[string]string{"tier": "front"}
	apart := &scheduler.Terms{AntiAffinity: []api.AffinityTerm{{Selector: tier, Topology: api.SpreadMachine, Mode: api.AffinityRequired}}}
	var pending []scheduler.Replica
	for s := range 20 {
		for i := range 10 {
			r := replicas(fmt.Sprintf("t%d", s), 10, 250)[i]
			r.Labels, r.Terms = tier, apart
			pending = append(pending, r)
		}
	}
	p := Compute(DefaultConfig(), Input{Groups: []*Group{g}, Pending: pending, Now: now})
	if len(p.Pending) != 0 || len(p.Add) != len(pending) {
		t.Fatalf("want a machine for each of the %d replicas: %d machines, %d pending", len(pending), len(p.Add), len(p.Pending))
	}
	if p.NewCapacityCost < p.LowerBound*(1-1e-9) || p.Gap > 0.01 {
		t.Fatalf("cost %.4f, bound %.4f, gap %.1f%%: want the bound to count the %d machines the tier forces", p.NewCapacityCost, p.LowerBound, 100*p.Gap, len(pending))
	}
}

// Two services kept apart in zones (one selector, topology zone): one
// replica per zone, so a machine each; the bound counts those machines
// (apart in zones is apart on machines), not the fraction of one their
// requests fill.
func TestBoundCountsWhatZoneAntiAffinityForces(t *testing.T) {
	g := group("g", 0, 0, 10, itype(1), itype(2))
	db := map[string]string{"role": "db"}
	apart := &scheduler.Terms{AntiAffinity: []api.AffinityTerm{{Selector: db, Topology: api.SpreadZone, Mode: api.AffinityRequired}}}
	var pending []scheduler.Replica
	for _, svc := range []string{"primary", "replica"} {
		r := replicas(svc, 1, 250)[0]
		r.Labels, r.Terms = db, apart
		pending = append(pending, r)
	}
	p := Compute(DefaultConfig(), Input{Groups: []*Group{g}, Pending: pending, Now: now})
	if len(p.Pending) != 0 || len(p.Add) != 2 || p.Add[0].Zone == p.Add[1].Zone {
		t.Fatalf("want a machine in each zone: %+v, pending %+v", p.Add, p.Pending)
	}
	if p.NewCapacityCost < p.LowerBound*(1-1e-9) || p.Gap > 1e-6 {
		t.Fatalf("cost %.4f, bound %.4f, gap %.1f%%: want the bound to count the two machines", p.NewCapacityCost, p.LowerBound, 100*p.Gap)
	}
}

// A plan without its bound (SkipBound, the control loop's passes) is the
// same plan, with no LowerBound or Gap.
func TestSkipBoundLeavesOnlyTheBoundOut(t *testing.T) {
	g := group("g", 0, 0, 100, []provisioner.InstanceType{itype(2), itype(4)}...)
	in := Input{Groups: []*Group{g}, Pending: replicas("web", 9, 700), Now: now}
	withBound := Compute(DefaultConfig(), in)
	cfg := DefaultConfig()
	cfg.SkipBound = true
	without := Compute(cfg, in)
	if withBound.LowerBound <= 0 || without.LowerBound != 0 || without.Gap != 0 {
		t.Fatalf("bound %.4f with it, %.4f (gap %.3f) without: want one only with it", withBound.LowerBound, without.LowerBound, without.Gap)
	}
	without.LowerBound, without.Gap = withBound.LowerBound, withBound.Gap
	if !reflect.DeepEqual(withBound, without) {
		t.Fatalf("skipping the bound changed the plan:\n%+v\n%+v", withBound, without)
	}
}
