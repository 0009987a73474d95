package fleet

import (
	"errors"
	"fmt"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/internal/randid"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/store"
)

// Intent is a machine to launch.
type Intent struct {
	Cluster      *api.Cluster
	Group        string
	InstanceType string
	Capacity     api.Resources
	Zone         string
	CapacityType string
	PricePerHour float64
	ProviderKey  string
	TemplateHash string
	// Replaces is the machine this one is launched to replace.
	Replaces string
}

// idAttempts bounds the retries of an intent whose random id was taken.
const idAttempts = 5

// RecordIntent records a launch intent in tx, before any provider call:
// a new machine, provisioning, with an id from newID (NewMachineID), a
// launch key and the lowest /24 of the cluster's range that no live
// machine holds. An id that is taken is never overwritten: another is
// drawn.
func RecordIntent(tx store.Tx, in Intent, now time.Time, newID func(cluster, group string) string) (*api.Machine, error) {
	c := in.Cluster
	g, _ := c.Group(in.Group)
	machines, err := tx.ListMachines(store.MachineFilter{Cluster: c.Metadata.Name, LiveOnly: true})
	if err != nil {
		return nil, err
	}
	subnet, err := NextSubnet(c.Spec.ContainerCIDR, machines)
	if err != nil {
		return nil, err
	}
	t := now.UTC()
	for attempt := 1; ; attempt++ {
		m := &api.Machine{
			ID: newID(c.Metadata.Name, in.Group), Cluster: c.Metadata.Name, Group: in.Group,
			InstanceType: in.InstanceType, CapacityType: in.CapacityType, Zone: in.Zone, PricePerHour: in.PricePerHour,
			LaunchKey: "lk-" + randid.Base32(20), Provider: c.Spec.Provider.Name, ProviderKey: in.ProviderKey, TemplateHash: in.TemplateHash,
			JoinState: api.JoinProvisioning, FleetState: api.FleetReady, Labels: g.Labels, Capacity: in.Capacity, Subnet: subnet,
			CreatedAt: t, StateChangedAt: t, Replaces: in.Replaces,
		}
		err := tx.CreateMachine(m)
		if err == nil {
			return m, nil
		}
		if !errors.Is(err, store.ErrExists) || attempt == idAttempts {
			return nil, fmt.Errorf("record launch intent for %s/%s: %w", c.Metadata.Name, in.Group, err)
		}
	}
}

// UnassignReplicas returns every replica of a machine to pending (with an
// event each); replicas that were moving off it keep their new machine.
func UnassignReplicas(tx store.Tx, machineID, why string, now time.Time) error {
	moving, err := tx.ListReplicas(store.ReplicaFilter{PreviousMachine: machineID})
	if err != nil {
		return err
	}
	for _, r := range moving {
		replica.EndMove(r)
		if err := tx.PutReplica(r); err != nil {
			return err
		}
	}
	replicas, err := tx.ListReplicas(store.ReplicaFilter{Machine: machineID})
	if err != nil {
		return err
	}
	for _, r := range replicas {
		replica.ToPending(r, why, now)
		if err := tx.PutReplica(r); err != nil {
			return err
		}
		if err := store.Record(tx, now, api.EventNormal, "Rescheduling", "Replica", r.ID, "%s", why); err != nil {
			return err
		}
	}
	return nil
}
