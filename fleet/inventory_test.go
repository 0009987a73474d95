package fleet

import (
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
)

func TestCapInventory(t *testing.T) {
	offered := &provisioner.InstanceType{MilliCPU: 2000, MemoryBytes: 4 << 30, GPUs: []provisioner.GPU{{Type: "nvidia-t4", Count: 1, VRAMGB: 16}}}
	claim := api.Inventory{Capacity: api.Resources{MilliCPU: 1_000_000, MemoryBytes: 2 << 30, GPUs: 4},
		GPUs: []api.GPUDevice{{Index: 0, Type: "nvidia-t4", VRAMGB: 16}, {Index: 1, Type: "nvidia-t4"}, {Index: 2, Type: "nvidia-t4"}, {Index: 3, Type: "nvidia-t4"}}}
	got, cut := CapInventory(claim, offered)
	if got.Capacity.MilliCPU != 2000 || got.Capacity.MemoryBytes != 2<<30 || got.Capacity.GPUs != 1 || len(got.GPUs) != 1 {
		t.Fatalf("capped %+v (%d devices)", got.Capacity, len(got.GPUs))
	}
	if len(cut) != 5 {
		t.Fatalf("cuts %v, want cpu, three devices and the count", cut)
	}
	if _, cut := CapInventory(claim, nil); cut != nil {
		t.Fatalf("an unknown type bounds nothing: %v", cut)
	}
}

// Devices are capped whatever count the agent claims, and by the type's
// GPU kinds: type and VRAM, not only their number.
func TestCapInventoryChecksGPUDevices(t *testing.T) {
	eight := make([]api.GPUDevice, 8)
	for i := range eight {
		eight[i] = api.GPUDevice{Index: i, Type: "nvidia-h100", VRAMGB: 80}
	}
	cases := map[string]struct {
		offered     []provisioner.GPU
		claimCount  int
		wantDevices int
		wantVRAM    float64
	}{
		"no GPUs, count 0, eight devices": {nil, 0, 0, 0},
		"two of the type":                 {[]provisioner.GPU{{Type: "nvidia-h100", Count: 2, VRAMGB: 80}}, 8, 2, 80},
		"another type":                    {[]provisioner.GPU{{Type: "nvidia-t4", Count: 8, VRAMGB: 16}}, 8, 0, 0},
		"less VRAM":                       {[]provisioner.GPU{{Type: "NVIDIA-H100", Count: 8, VRAMGB: 40}}, 8, 8, 40},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			it := &provisioner.InstanceType{MilliCPU: 8000, MemoryBytes: 32 << 30, GPUs: c.offered}
			got, cut := CapInventory(api.Inventory{Capacity: api.Resources{MilliCPU: 8000, GPUs: c.claimCount}, GPUs: eight}, it)
			if len(got.GPUs) != c.wantDevices || got.Capacity.GPUs != c.wantDevices || len(cut) == 0 {
				t.Fatalf("kept %d devices, count %d, cuts %v; want %d", len(got.GPUs), got.Capacity.GPUs, cut, c.wantDevices)
			}
			for _, d := range got.GPUs {
				if d.VRAMGB != c.wantVRAM {
					t.Fatalf("device %d keeps %g GB, want %g", d.Index, d.VRAMGB, c.wantVRAM)
				}
			}
		})
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
