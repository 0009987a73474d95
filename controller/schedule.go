package controller

import (
	"context"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/scheduler"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// RuntimeFor is the runtime a service needs: containers for an image,
// processes for a command.
func RuntimeFor(s api.ServiceSpec) string {
	if s.Image != "" {
		return scheduler.RuntimeDocker
	}
	return scheduler.RuntimeProcess
}

func toSchedReplica(r *api.Replica, svc *api.Service) scheduler.Replica {
	p := svc.Spec.Placement
	return scheduler.Replica{
		ID: r.ID, Service: r.Service, Cluster: r.Cluster, Index: r.Index, Requests: r.Requests,
		Runtime: RuntimeFor(svc.Spec), Groups: p.CapacityGroups, NodeSelector: p.NodeSelector,
		Dedicated: p.Dedicated, Priority: p.Priority, Spread: p.Spread,
	}
}

// schedulerMachines turns joined machines into the scheduler's view, with
// what their replicas already hold.
func schedulerMachines(snap *snapshot) []*scheduler.Machine {
	byID := map[string]*scheduler.Machine{}
	var out []*scheduler.Machine
	for _, m := range snap.machines {
		cl, ok := snap.clusters[m.Cluster]
		if !m.Schedulable() || !ok {
			continue
		}
		sm := &scheduler.Machine{
			ID: m.ID, Cluster: m.Cluster, Group: m.Group, Zone: m.Zone, Labels: m.Labels, Runtimes: m.Runtimes,
			Allocatable: planner.Allocatable(m.Capacity, spec.Reserved(cl.Spec.SystemReserved)),
		}
		byID[m.ID] = sm
		out = append(out, sm)
	}
	for _, r := range snap.replicas {
		if sm, ok := byID[r.Machine]; ok {
			scheduler.Assign(sm, scheduler.Replica{Service: r.Service, Requests: r.Requests}, r.GPUIndexes)
		}
	}
	return out
}

// schedule places pending replicas and records the result. It returns the
// placements and the replicas still unplaced (for the planner).
func (c *Controller) schedule(ctx context.Context, snap *snapshot) (map[string]string, []scheduler.Replica, error) {
	services := map[string]*api.Service{}
	for _, s := range snap.services {
		services[s.Metadata.Name] = s
	}
	var pending []scheduler.Replica
	for _, r := range snap.replicas {
		if svc, ok := services[r.Service]; ok && r.Machine == "" {
			pending = append(pending, toSchedReplica(r, svc))
		}
	}
	if len(pending) == 0 {
		return nil, nil, nil
	}
	res := scheduler.Schedule(schedulerMachines(snap), pending)
	placed := map[string]string{}
	for _, p := range res.Placements {
		placed[p.ReplicaID] = p.MachineID
	}
	var unplaced []scheduler.Replica
	for _, r := range pending {
		if _, ok := res.Unplaced[r.ID]; ok {
			unplaced = append(unplaced, r)
		}
	}
	err := c.store.Update(ctx, func(tx store.Tx) error {
		for replicaID, machineID := range placed {
			if err := assign(tx, replicaID, machineID); err != nil {
				return err
			}
		}
		return nil
	})
	return res.Unplaced, unplaced, err
}

func assign(tx store.Tx, replicaID, machineID string) error {
	r, err := tx.GetReplica(replicaID)
	if err != nil || r.Machine != "" {
		return nil // deleted or placed meanwhile
	}
	m, err := tx.GetMachine(machineID)
	if err != nil || !m.Schedulable() {
		return nil
	}
	r.Machine, r.State, r.Reason, r.UpdatedAt = machineID, api.ReplicaAssigned, "", time.Now().UTC()
	if len(m.Addresses) > 0 {
		r.Address = m.Addresses[0]
	}
	if err := tx.PutReplica(r); err != nil {
		return err
	}
	return store.Record(tx, api.EventNormal, "Scheduled", "Replica", r.ID, "placed on machine %s", machineID)
}

// setPendingReasons records why each unplaced replica waits, with an event
// only when the reason changes.
func setPendingReasons(tx store.Tx, reasons map[string]string) error {
	for id, reason := range reasons {
		r, err := tx.GetReplica(id)
		if err != nil || r.Machine != "" || r.Reason == reason {
			continue
		}
		r.Reason, r.State, r.UpdatedAt = reason, api.ReplicaPending, time.Now().UTC()
		if err := tx.PutReplica(r); err != nil {
			return err
		}
		if err := store.Record(tx, api.EventWarning, "Pending", "Replica", id, "%s", reason); err != nil {
			return err
		}
	}
	return nil
}
