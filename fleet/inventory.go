package fleet

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
)

// CapInventory bounds what an agent reports by what its machine's
// instance type offers: a machine credential cannot claim 1,000 CPUs on a
// 2-CPU type, nor GPU devices its type does not have. A nil type (a machine
// joined by hand) or a zero limit bounds nothing. It returns what it
// cut, for an event.
func CapInventory(inv api.Inventory, it *provisioner.InstanceType) (api.Inventory, []string) {
	if it == nil {
		return inv, nil
	}
	var cut []string
	capAt := func(name string, got *int64, limit int64, format func(int64) string) {
		if limit > 0 && *got > limit {
			cut = append(cut, fmt.Sprintf("%s %s → %s", name, format(*got), format(limit)))
			*got = limit
		}
	}
	capAt("cpu", &inv.Capacity.MilliCPU, it.MilliCPU, api.FormatCPU)
	capAt("memory", &inv.Capacity.MemoryBytes, it.MemoryBytes, api.FormatBytes)
	capAt("ephemeral storage", &inv.Capacity.EphemeralBytes, it.EphemeralBytes, api.FormatBytes)
	devices, dropped := capDevices(inv.GPUs, it.GPUs)
	cut = append(cut, dropped...)
	inv.GPUs = devices
	limit := it.GPUCount()
	if len(inv.GPUs) > 0 || len(dropped) > 0 {
		limit = min(limit, len(inv.GPUs))
	}
	if inv.Capacity.GPUs > limit {
		cut = append(cut, fmt.Sprintf("gpus %d → %d", inv.Capacity.GPUs, limit))
		inv.Capacity.GPUs = limit
	}
	return inv, cut
}

// capDevices keeps the devices the type has: for each of its GPU kinds,
// at most Count devices of that type, each with at most its VRAM. A
// device of a type the instance type does not have is dropped.
func capDevices(devices []api.GPUDevice, offered []provisioner.GPU) ([]api.GPUDevice, []string) {
	left := make([]int, len(offered))
	for i, g := range offered {
		left[i] = g.Count
	}
	var kept []api.GPUDevice
	var cut []string
	for _, d := range devices {
		i := slices.IndexFunc(offered, func(g provisioner.GPU) bool { return strings.EqualFold(g.Type, d.Type) })
		if i < 0 || left[i] == 0 {
			cut = append(cut, fmt.Sprintf("gpu device %d (%s): %s", d.Index, cmp.Or(d.Type, "no type"), deviceRefusal(i, offered)))
			continue
		}
		left[i]--
		if vram := offered[i].VRAMGB; vram > 0 && d.VRAMGB > vram {
			cut = append(cut, fmt.Sprintf("gpu device %d vram %gGB → %gGB", d.Index, d.VRAMGB, vram))
			d.VRAMGB = vram
		}
		kept = append(kept, d)
	}
	return kept, cut
}

func deviceRefusal(i int, offered []provisioner.GPU) string {
	if i < 0 {
		return "not a GPU type of the instance type"
	}
	return fmt.Sprintf("more than its %d", offered[i].Count)
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
