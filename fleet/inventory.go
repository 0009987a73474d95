package fleet

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gantry-dev/gantry/api"
)

// CapInventory bounds what an agent reports by what its machine's
// instance type offers: a machine credential cannot claim 1,000 CPUs on a
// 2-CPU type. A zero limit (unknown) bounds nothing. It returns what it
// cut, for an event.
func CapInventory(inv api.Inventory, offered api.Resources) (api.Inventory, []string) {
	var cut []string
	capAt := func(name string, got *int64, limit int64, format func(int64) string) {
		if limit > 0 && *got > limit {
			cut = append(cut, fmt.Sprintf("%s %s → %s", name, format(*got), format(limit)))
			*got = limit
		}
	}
	capAt("cpu", &inv.Capacity.MilliCPU, offered.MilliCPU, api.FormatCPU)
	capAt("memory", &inv.Capacity.MemoryBytes, offered.MemoryBytes, api.FormatBytes)
	capAt("ephemeral storage", &inv.Capacity.EphemeralBytes, offered.EphemeralBytes, api.FormatBytes)
	if offered.MilliCPU > 0 && inv.Capacity.GPUs > offered.GPUs {
		cut = append(cut, fmt.Sprintf("gpus %d → %d", inv.Capacity.GPUs, offered.GPUs))
		inv.Capacity.GPUs = offered.GPUs
		if len(inv.GPUs) > offered.GPUs {
			inv.GPUs = inv.GPUs[:offered.GPUs]
		}
	}
	return inv, cut
}

// PlacementChanges names how an inventory moves a launched machine: a
// new zone or new addresses are news (a machine should not move).
func PlacementChanges(m *api.Machine, inv api.Inventory) []string {
	var out []string
	if inv.Zone != "" && m.Zone != "" && inv.Zone != m.Zone {
		out = append(out, fmt.Sprintf("zone %s → %s", m.Zone, inv.Zone))
	}
	if len(inv.Addresses) > 0 && len(m.Addresses) > 0 && !slices.Equal(inv.Addresses, m.Addresses) {
		out = append(out, fmt.Sprintf("addresses %s → %s", strings.Join(m.Addresses, ","), strings.Join(inv.Addresses, ",")))
	}
	return out
}
