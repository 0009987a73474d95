package planner

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/scheduler"
)

func group(id string, live, min, max int, milliCPU int64, price float64) *Group {
	return &Group{Cluster: "c", ID: id, MinSize: min, MaxSize: max, Live: live, PricePerHour: price,
		Template: scheduler.Machine{Cluster: "c", Group: id, Runtimes: []string{scheduler.RuntimeProcess},
			Allocatable: api.Resources{MilliCPU: milliCPU, MemoryBytes: 8 << 30}}}
}

func replicas(n int, milliCPU int64) []scheduler.Replica {
	var out []scheduler.Replica
	for i := 0; i < n; i++ {
		out = append(out, scheduler.Replica{ID: fmt.Sprintf("web-%d", i), Service: "web", Cluster: "c", Index: i,
			Runtime: scheduler.RuntimeProcess, Requests: api.Resources{MilliCPU: milliCPU, MemoryBytes: 1 << 20}})
	}
	return out
}

func TestMinSizeWithoutDemand(t *testing.T) {
	p := Compute(Config{}, time.Now(), []*Group{group("g", 0, 2, 5, 2000, 1)}, nil, nil)
	if p.Desired["c/g"] != 2 {
		t.Fatalf("desired %d, want minSize 2", p.Desired["c/g"])
	}
}

func TestGrowsForPendingReplicasUpToMax(t *testing.T) {
	// 5 replicas of 1 CPU on 2-CPU machines need 3 machines.
	p := Compute(Config{}, time.Now(), []*Group{group("g", 0, 0, 10, 2000, 1)}, replicas(5, 1000), nil)
	if p.Desired["c/g"] != 3 {
		t.Fatalf("desired %d, want 3", p.Desired["c/g"])
	}
	p = Compute(Config{}, time.Now(), []*Group{group("g", 0, 0, 2, 2000, 1)}, replicas(5, 1000), nil)
	if p.Desired["c/g"] != 2 || len(p.Unplaceable) != 1 || !strings.Contains(p.Unplaceable["web-4"], "at maxSize 2") {
		t.Fatalf("capped plan: %+v", p)
	}
}

func TestPendingMachinesAbsorbDemand(t *testing.T) {
	g := group("g", 1, 0, 10, 2000, 1)
	launching := g.Template
	launching.ID = "m-1"
	g.Pending = []*scheduler.Machine{&launching}
	p := Compute(Config{}, time.Now(), []*Group{g}, replicas(2, 1000), nil)
	if p.Desired["c/g"] != 1 {
		t.Fatalf("a launching machine fits both replicas; desired %d", p.Desired["c/g"])
	}
}

func TestCheapestGroupFirstAndTooBig(t *testing.T) {
	cheap, dear := group("cheap", 0, 0, 5, 2000, 0.1), group("dear", 0, 0, 5, 2000, 0.5)
	p := Compute(Config{}, time.Now(), []*Group{dear, cheap}, replicas(1, 1000), nil)
	if p.Desired["c/cheap"] != 1 || p.Desired["c/dear"] != 0 {
		t.Fatalf("want the cheap group: %+v", p.Desired)
	}
	p = Compute(Config{}, time.Now(), []*Group{cheap}, replicas(1, 4000), nil)
	if !strings.Contains(p.Unplaceable["web-0"], "insufficient cpu on an empty machine") {
		t.Fatalf("reason: %q", p.Unplaceable["web-0"])
	}
}

func TestRemovesOnlyLongEmptyMachinesAboveMin(t *testing.T) {
	now := time.Now()
	cfg := Config{EmptyMachineTTL: time.Minute}
	g := group("g", 3, 1, 5, 2000, 1)
	ms := []Machine{
		{ID: "a", Cluster: "c", Group: "g", Replicas: 1, IdleSince: now.Add(-time.Hour)},
		{ID: "b", Cluster: "c", Group: "g", IdleSince: now.Add(-time.Hour)},
		{ID: "c", Cluster: "c", Group: "g", IdleSince: now.Add(-time.Second)},
	}
	p := Compute(cfg, now, []*Group{g}, nil, ms)
	if len(p.Remove) != 1 || p.Remove[0] != "b" {
		t.Fatalf("remove %v, want [b]", p.Remove)
	}
	g.Live = 1
	if p := Compute(cfg, now, []*Group{g}, nil, ms); len(p.Remove) != 0 {
		t.Fatalf("removed below minSize: %v", p.Remove)
	}
	g.Live = 3
	if p := Compute(cfg, now, []*Group{g}, replicas(1, 100000), ms); len(p.Remove) != 0 {
		t.Fatalf("removed while replicas wait: %v", p.Remove)
	}
}
