package server

import (
	"math"
	"testing"

	"github.com/gantry-dev/gantry/api"
)

// A machine's price is shared by its replicas' requests (CPU and memory
// weighted alike); what they leave is idle; a failed replica holds
// nothing, nor a replica on a machine that is gone.
func TestCostByServiceSharesEachMachineByRequests(t *testing.T) {
	machines := []*api.Machine{
		{ID: "m1", PricePerHour: 1.0, Allocatable: api.Resources{MilliCPU: 2000, MemoryBytes: 4 << 30}},
		{ID: "m2", PricePerHour: 0.5, Allocatable: api.Resources{MilliCPU: 1000, MemoryBytes: 2 << 30}},
	}
	replicas := []*api.Replica{
		{ID: "web-0", Service: "web", Cluster: "c", Machine: "m1", State: api.ReplicaRunning, Requests: api.Resources{MilliCPU: 1000, MemoryBytes: 1 << 30}},
		{ID: "web-1", Service: "web", Cluster: "c", Machine: "m2", State: api.ReplicaRunning, Requests: api.Resources{MilliCPU: 1000, MemoryBytes: 2 << 30}},
		{ID: "db-0", Service: "db", Cluster: "c", Machine: "m1", State: api.ReplicaStarting, Requests: api.Resources{MilliCPU: 500, MemoryBytes: 2 << 30}},
		{ID: "db-1", Service: "db", Cluster: "c", Machine: "m1", State: api.ReplicaFailed, Requests: api.Resources{MilliCPU: 500, MemoryBytes: 2 << 30}},
		{ID: "db-2", Service: "db", Cluster: "c", Machine: "gone", State: api.ReplicaRunning, Requests: api.Resources{MilliCPU: 500}},
	}
	services, idle := costByService(machines, replicas)
	// web: m1 (0.5+0.25)/2 × 1.0 = 0.375, m2 (1+1)/2 × 0.5 = 0.5; db: m1 (0.25+0.5)/2 = 0.375.
	want := []api.ServiceCost{{Service: "web", Cluster: "c", Replicas: 2, PerHour: 0.875}, {Service: "db", Cluster: "c", Replicas: 1, PerHour: 0.375}}
	if len(services) != len(want) {
		t.Fatalf("services %+v, want %+v", services, want)
	}
	for i, w := range want {
		g := services[i]
		if g.Service != w.Service || g.Replicas != w.Replicas || math.Abs(g.PerHour-w.PerHour) > 1e-9 {
			t.Errorf("service %d: %+v, want %+v", i, g, w)
		}
	}
	if math.Abs(idle-0.25) > 1e-9 {
		t.Errorf("idle %.4f $/h, want 0.25 (1.5 − 0.875 − 0.375)", idle)
	}
}
