package heartbeat

import (
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/store"
)

// checkInventory bounds what an agent reports by its instance type, and
// records what it cut and a launched machine's move (new zone or
// addresses) as events.
func (in *Ingester) CheckInventory(tx store.Tx, m *api.Machine, inv api.Inventory, now time.Time) (api.Inventory, error) {
	offered, err := in.InstanceType(tx, m)
	if err != nil {
		return inv, err
	}
	inv, cut := fleet.CapInventory(inv, offered)
	if len(cut) > 0 {
		if err := store.Record(tx, now, api.EventWarning, "CapacityCapped", "Machine", m.ID,
			"the agent reported more than instance type %s offers; kept %s", m.InstanceType, strings.Join(cut, ", ")); err != nil {
			return inv, err
		}
	}
	if m.ProviderID != "" {
		if moved := fleet.PlacementChanges(m, inv); len(moved) > 0 {
			if err := store.Record(tx, now, api.EventWarning, "PlacementChanged", "Machine", m.ID, "%s", strings.Join(moved, "; ")); err != nil {
				return inv, err
			}
		}
	}
	return inv, nil
}
