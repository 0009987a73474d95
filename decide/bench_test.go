package decide_test

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/decidetest"
)

// A steady pass over a large fleet: 10,000 joined machines running
// 100,000 replicas of 1,000 services, nothing to do. What a pass costs the
// leader every interval.
func BenchmarkDecideSteady10kMachines(b *testing.B) {
	h := fleet10k(b)
	plan := h.Decide()
	if n := len(plan.Assignments) + len(plan.Launches) + len(plan.CreateReplicas); n != 0 {
		b.Fatalf("a steady fleet decided %d changes", n)
	}
	benchDecide(b, h)
}

// The same fleet the pass after every service changed: 1,000 deployments
// start at once (each makes its first surge replica).
func BenchmarkDecideDeploying10kMachines(b *testing.B) {
	h := fleet10k(b)
	h.Decide()
	for _, svc := range h.Snap.Services {
		svc.Spec.Env = map[string]string{"V": "2"}
	}
	if plan := h.Decide(); len(plan.CreateReplicas) != 1000 {
		b.Fatalf("1,000 deployments made %d replicas", len(plan.CreateReplicas))
	}
	benchDecide(b, h)
}

// A pass at 50,000 machines and 500,000 replicas after 1,000 services
// each gained a replica: the controller's BenchmarkPassSteady50k/changed
// without the store, quick to set up and to profile:
//
//	go test ./decide -run '^$' -bench DecideChanged50k -benchtime 5x -count 6
func BenchmarkDecideChanged50kMachines(b *testing.B) { benchChanged(b, 1000) }

// The same fleet the pass after one service gained a replica: what a
// lone change waits for.
//
//	go test ./decide -run '^$' -bench DecideOneChange50k -benchtime 10x -count 6
func BenchmarkDecideOneChange50kMachines(b *testing.B) { benchChanged(b, 1) }

func benchChanged(b *testing.B, services int) {
	h := steadyFleet(b, 50000, 5000)
	h.Decide() // the deployments begin
	steady := h.Decide()
	mem := h.Memory
	for _, svc := range h.Snap.Services[:services] {
		more := *svc.Spec.Replicas + 1
		svc.Spec.Replicas = &more
	}
	if plan := h.Decide(); len(plan.CreateReplicas) != services || len(plan.Assignments) != services {
		b.Fatalf("%d services one replica more: %d replicas made, %d placed", services, len(plan.CreateReplicas), len(plan.Assignments))
	}
	// The pass after the steady one, as the controller decides it: from
	// the steady pass's booking and memory, with what changed since (the
	// harness's last pass found it).
	h.Snap.Booked, h.Memory = steady.Booked, mem
	benchDecide(b, h)
}

func benchDecide(b *testing.B, h *decidetest.Harness) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		decide.Decide(h.Config, h.Snap, h.Memory, h.Now)
	}
	b.ReportMetric(float64(len(h.Snap.Replicas))/(b.Elapsed().Seconds()/float64(b.N)), "replicas/s")
}

// fleet10k is 10,000 joined machines running 100,000 replicas of 1,000
// services.
func fleet10k(b *testing.B) *decidetest.Harness { return steadyFleet(b, 10000, 1000) }

// steadyFleet is machines joined machines running services services of 100
// replicas each.
func steadyFleet(b *testing.B, machineCount, services int) *decidetest.Harness {
	h := decidetest.New(b)
	h.Cluster("c", decidetest.Group("g", "large", 0, 2*machineCount))
	var machines []string
	for range machineCount {
		machines = append(machines, h.Machine("c", "g", "large").ID)
	}
	for s := range services {
		name := fmt.Sprintf("svc%d", s)
		h.Service(name, "c", 100, "100m", "64Mi")
		for i := 0; i < 100; i++ {
			h.Replica(name, i, machines[(s*100+i)%len(machines)])
		}
	}
	// As the store and a server's view list them: by service and id.
	slices.SortFunc(h.Snap.Replicas, func(a, b *api.Replica) int {
		return cmp.Or(strings.Compare(a.Service, b.Service), strings.Compare(a.ID, b.ID))
	})
	h.Config.Planner.MaxRemovals = 0
	return h
}
