package fleet

import (
	"testing"

	"github.com/gantry-dev/gantry/api"
)

func TestCapInventory(t *testing.T) {
	offered := api.Resources{MilliCPU: 2000, MemoryBytes: 4 << 30, GPUs: 1}
	claim := api.Inventory{Capacity: api.Resources{MilliCPU: 1_000_000, MemoryBytes: 2 << 30, GPUs: 4},
		GPUs: []api.GPUDevice{{Index: 0}, {Index: 1}, {Index: 2}, {Index: 3}}}
	got, cut := CapInventory(claim, offered)
	if got.Capacity.MilliCPU != 2000 || got.Capacity.MemoryBytes != 2<<30 || got.Capacity.GPUs != 1 || len(got.GPUs) != 1 {
		t.Fatalf("capped %+v (%d devices)", got.Capacity, len(got.GPUs))
	}
	if len(cut) != 2 {
		t.Fatalf("cuts %v, want cpu and gpus", cut)
	}
	if _, cut := CapInventory(claim, api.Resources{}); cut != nil {
		t.Fatalf("an unknown type bounds nothing: %v", cut)
	}
}

func TestPlacementChanges(t *testing.T) {
	m := &api.Machine{Zone: "a", Addresses: []string{"10.0.0.1"}}
	if got := PlacementChanges(m, api.Inventory{Zone: "a", Addresses: []string{"10.0.0.1"}}); got != nil {
		t.Fatalf("no change: %v", got)
	}
	if got := PlacementChanges(m, api.Inventory{Zone: "b", Addresses: []string{"10.0.0.2"}}); len(got) != 2 {
		t.Fatalf("zone and address changes: %v", got)
	}
}
