package server

import (
	"errors"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/store"
)

// checkInventory bounds what an agent reports by its instance type, and
// records what it cut and a launched machine's move (new zone or
// addresses) as events.
func (s *Server) checkInventory(tx store.Tx, m *api.Machine, inv api.Inventory, now time.Time) (api.Inventory, error) {
	offered, err := s.instanceType(tx, m)
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

// instanceType is m's instance type in its provider's catalog (nil when
// unknown: a machine joined by hand has no type).
func (s *Server) instanceType(tx store.Tx, m *api.Machine) (*provisioner.InstanceType, error) {
	if m.InstanceType == "" {
		return nil, nil
	}
	cl, err := tx.GetCluster(m.Cluster)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	types, ok := s.registry.Catalog(cl.Spec.Provider)
	if !ok {
		return nil, nil
	}
	for _, it := range types {
		if it.Name == m.InstanceType {
			return &it, nil
		}
	}
	return nil, nil
}
