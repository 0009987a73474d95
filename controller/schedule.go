package controller

import (
	"context"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/runtime"
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

func toSchedReplica(r *api.Replica, svc *api.Service, zones []string) scheduler.Replica {
	p := svc.Spec.Placement
	req := r.Requests
	req.GPUs = 0 // GPUs are matched by device, from GPU below
	sr := scheduler.Replica{
		ID: r.ID, Service: r.Service, Cluster: r.Cluster, Index: r.Index, Requests: req,
		Runtime: RuntimeFor(svc.Spec), Isolation: svc.Spec.Isolation, Groups: p.CapacityGroups, NodeSelector: p.NodeSelector,
		Dedicated: p.Dedicated, SameZone: p.SameZone, Priority: p.Priority, Scoring: p.Scoring, Spread: p.Spread, ZoneDomains: zones,
		Preempt: p.PreemptLowerPriority,
	}
	if g := svc.Spec.Resources.GPU; g != nil {
		sr.GPU = &scheduler.GPUNeed{Count: g.Count, Type: g.Type, MinVRAMGB: g.MinVRAMGB, Preferred: g.Policy == api.GPUPreferred}
	}
	return sr
}

// schedulerMachine is a live machine as the scheduler sees it, before its
// replicas are booked.
func schedulerMachine(m *api.Machine, cl *api.Cluster) *scheduler.Machine {
	sm := &scheduler.Machine{
		ID: m.ID, Cluster: m.Cluster, Group: m.Group, Zone: m.Zone, CapacityType: m.CapacityType, Labels: m.Labels,
		Runtimes: m.Runtimes, PricePerHour: m.PricePerHour, ServiceCount: map[string]int{},
		Allocatable: planner.Allocatable(m.Capacity, spec.Reserved(cl.Spec.SystemReserved)),
	}
	for _, rt := range m.Runtimes {
		sm.TEE = sm.TEE || runtime.IsTEE(rt)
	}
	for _, g := range m.GPUs {
		sm.GPUs = append(sm.GPUs, scheduler.GPU{Index: g.Index, Type: g.Type, VRAMGB: g.VRAMGB})
	}
	return sm
}

// view is the pass's model of the fleet: every live machine that is not
// going away, with its replicas booked.
type view struct {
	machines  map[string]*planner.Machine
	joined    []*scheduler.Machine
	services  map[string]*api.Service
	zones     map[string][]string
	idleSince map[string]time.Time
}

func (c *Controller) buildView(snap *snapshot, now time.Time) *view {
	return buildView(snap, c.cfg.RuntimesOf, func(v *view) map[string]time.Time { return c.trackIdle(v, now) })
}

// buildView models the fleet; idle says since when each joined machine
// has been empty.
func buildView(snap *snapshot, runtimesOf func(string) []string, idle func(*view) map[string]time.Time) *view {
	v := &view{machines: map[string]*planner.Machine{}, services: map[string]*api.Service{}, zones: map[string][]string{}}
	for _, s := range snap.services {
		v.services[s.Metadata.Name] = s
	}
	for name, cl := range snap.clusters {
		for _, g := range cl.Spec.CapacityGroups {
			v.zones[name] = append(v.zones[name], g.Zones...)
		}
	}
	for _, m := range snap.machines {
		cl, ok := snap.clusters[m.Cluster]
		if !ok || !m.Live() || m.FleetState == api.FleetTerminating || m.FleetState == api.FleetDraining || m.FleetState == api.FleetStopped || m.UnreachableSince != nil {
			continue
		}
		pm := &planner.Machine{Machine: schedulerMachine(m, cl), Joined: m.JoinState == api.JoinJoined, CreatedAt: m.CreatedAt}
		if !pm.Joined {
			pm.Runtimes = runtimesOf(m.Provider)
		}
		v.machines[m.ID] = pm
		if pm.Joined && m.Schedulable() {
			v.joined = append(v.joined, pm.Machine)
		}
	}
	for _, r := range snap.replicas {
		pm, ok := v.machines[r.Machine]
		svc, known := v.services[r.Service]
		if !ok || !known {
			continue
		}
		sr := toSchedReplica(r, svc, v.zones[r.Cluster])
		scheduler.Assign(pm.Machine, sr, r.GPUIndexes)
		pm.Replicas = append(pm.Replicas, sr)
		pm.Residents = append(pm.Residents, scheduler.Resident{Replica: sr, Priority: sr.Priority, GPUs: r.GPUIndexes})
	}
	v.idleSince = idle(v)
	for id, pm := range v.machines {
		pm.IdleSince = v.idleSince[id]
	}
	return v
}

// schedule places pending replicas on joined machines and records the
// result; it returns the reasons and the replicas still unplaced.
func (c *Controller) schedule(ctx context.Context, snap *snapshot, v *view) (map[string]string, []scheduler.Replica, error) {
	draining := map[string]bool{}
	for _, m := range snap.machines {
		draining[m.ID] = m.FleetState == api.FleetDraining
	}
	var pending []scheduler.Replica
	for _, r := range snap.replicas {
		svc, ok := v.services[r.Service]
		moving := draining[r.Machine] && r.PreviousMachine == "" // its new copy must run first
		if ok && (r.Machine == "" || moving) {
			pending = append(pending, toSchedReplica(r, svc, v.zones[r.Cluster]))
		}
	}
	if len(pending) == 0 {
		return nil, nil, nil
	}
	res := scheduler.Schedule(v.joined, pending)
	byID := map[string]scheduler.Replica{}
	var unplaced []scheduler.Replica
	for _, r := range pending {
		byID[r.ID] = r
		if _, ok := res.Unplaced[r.ID]; ok {
			unplaced = append(unplaced, r)
		}
	}
	for _, e := range res.Evictions {
		pm := v.machines[e.MachineID]
		pm.Replicas = withoutReplica(pm.Replicas, e.ReplicaID)
	}
	for _, p := range res.Placements { // the planner must see them too
		pm := v.machines[p.MachineID]
		pm.Replicas = append(pm.Replicas, byID[p.ReplicaID])
	}
	err := c.store.Update(ctx, func(tx store.Tx) error {
		for _, e := range res.Evictions {
			if err := evict(tx, e); err != nil {
				return err
			}
		}
		for _, p := range res.Placements {
			if err := assign(tx, p); err != nil {
				return err
			}
		}
		return nil
	})
	return res.Unplaced, unplaced, err
}

func withoutReplica(rs []scheduler.Replica, id string) []scheduler.Replica {
	out := rs[:0]
	for _, r := range rs {
		if r.ID != id {
			out = append(out, r)
		}
	}
	return out
}

// evict sends a preempted replica back to pending; its agent stops it.
func evict(tx store.Tx, e scheduler.Eviction) error {
	r, err := tx.GetReplica(e.ReplicaID)
	if err != nil || r.Machine != e.MachineID {
		return nil
	}
	why := "preempted by higher-priority replica " + e.PreemptedBy
	r.Machine, r.State, r.Reason, r.Health, r.HostPorts, r.Address, r.GPUIndexes = "", api.ReplicaPending, why, "", nil, "", nil
	r.UpdatedAt = time.Now().UTC()
	if err := tx.PutReplica(r); err != nil {
		return err
	}
	return store.Record(tx, api.EventWarning, "Preempted", "Replica", r.ID, "%s on machine %s", why, e.MachineID)
}

func assign(tx store.Tx, p scheduler.Placement) error {
	r, err := tx.GetReplica(p.ReplicaID)
	if err != nil {
		return nil // deleted meanwhile
	}
	m, err := tx.GetMachine(p.MachineID)
	if err != nil || !m.Schedulable() {
		return nil
	}
	if r.Machine != "" { // moving off a draining machine, which keeps it until the new copy runs
		old, err := tx.GetMachine(r.Machine)
		if err != nil || old.FleetState != api.FleetDraining || r.PreviousMachine != "" {
			return nil
		}
		r.PreviousMachine = r.Machine
	}
	r.Machine, r.State, r.Reason, r.UpdatedAt = p.MachineID, api.ReplicaAssigned, "", time.Now().UTC()
	r.GPUIndexes, r.Note, r.RuntimeClass = p.GPUs, p.Note, ""
	if p.TEE {
		r.RuntimeClass = "tee"
	}
	if len(m.Addresses) > 0 {
		r.Address = m.Addresses[0]
	}
	if err := tx.PutReplica(r); err != nil {
		return err
	}
	msg := "placed on machine " + p.MachineID
	typ := api.EventNormal
	if p.Note != "" {
		msg, typ = msg+": "+p.Note, api.EventWarning
	}
	return store.Record(tx, typ, "Scheduled", "Replica", r.ID, "%s", msg)
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
