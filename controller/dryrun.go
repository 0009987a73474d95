package controller

import (
	"io"
	"log/slog"
	"sort"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/scheduler"
	"github.com/gantry-dev/gantry/spec"
)

// State is a store-free snapshot for a dry run: declared resources, and
// the machines and replicas that exist (none, for an empty cluster).
type State struct {
	Clusters []*api.Cluster
	Services []*api.Service
	Machines []*api.Machine
	Replicas []*api.Replica
}

// DryRun computes what one pass would do with st — where each pending
// replica goes, what machines to add and remove, and the cost — without
// touching anything. `gantry plan` shows it.
func DryRun(cfg planner.Config, st State, catalogs Catalogs, now time.Time) planner.Plan {
	snap := &snapshot{clusters: map[string]*api.Cluster{}, services: st.Services}
	for _, c := range st.Clusters {
		snap.clusters[c.Metadata.Name] = c
	}
	for _, m := range st.Machines {
		if m.Live() {
			snap.machines = append(snap.machines, m)
		}
	}
	snap.replicas = desiredReplicas(st, now)
	runtimesOf := DefaultConfig().RuntimesOf
	v := buildView(snap, runtimesOf, idleFromState(snap))
	var pending []scheduler.Replica
	for _, r := range snap.replicas {
		if svc, ok := v.services[r.Service]; ok && (r.Machine == "" || v.machines[r.Machine] == nil) {
			pending = append(pending, toSchedReplica(r, svc, v.zones[r.Cluster]))
		}
	}
	res := scheduler.Schedule(v.joined, pending)
	var unplaced []scheduler.Replica
	for _, r := range pending {
		if _, ok := res.Unplaced[r.ID]; ok {
			unplaced = append(unplaced, r)
		}
	}
	for _, e := range res.Evictions { // preempted replicas need a place too
		for _, r := range v.machines[e.MachineID].Replicas {
			if r.ID == e.ReplicaID {
				unplaced = append(unplaced, r)
			}
		}
		v.machines[e.MachineID].Replicas = withoutReplica(v.machines[e.MachineID].Replicas, e.ReplicaID)
	}
	groups, _ := plannerGroups(snap, catalogs, runtimesOf, slog.New(slog.NewTextHandler(io.Discard, nil)))
	machines := make([]*planner.Machine, 0, len(v.machines))
	for _, m := range v.machines {
		machines = append(machines, m)
	}
	sort.Slice(machines, func(i, j int) bool { return machines[i].ID < machines[j].ID })
	plan := planner.Compute(cfg, planner.Input{Groups: groups, Machines: machines, Pending: unplaced, Now: now})
	for _, p := range res.Placements {
		plan.Placements = append(plan.Placements, planner.ReplicaPlacement{Replica: p.ReplicaID, Machine: p.MachineID, GPUs: p.GPUs, TEE: p.TEE, Note: p.Note})
	}
	sort.Slice(plan.Placements, func(i, j int) bool { return plan.Placements[i].Replica < plan.Placements[j].Replica })
	return plan
}

// desiredReplicas: every replica each service wants, keeping the machine
// of those that exist.
func desiredReplicas(st State, now time.Time) []*api.Replica {
	existing := map[string]*api.Replica{}
	for _, r := range st.Replicas {
		existing[r.ID] = r
	}
	var out []*api.Replica
	for _, svc := range st.Services {
		for i := 0; i < svc.Spec.DesiredReplicas(); i++ {
			id := ReplicaID(svc.Metadata.Name, i)
			r := &api.Replica{ID: id, Service: svc.Metadata.Name, Cluster: svc.Spec.Cluster, Index: i, State: api.ReplicaPending, UpdatedAt: now}
			if e, ok := existing[id]; ok && e.Cluster == svc.Spec.Cluster {
				r.Machine, r.GPUIndexes = e.Machine, e.GPUIndexes
			}
			r.Requests = spec.Requests(svc.Spec)
			out = append(out, r)
		}
	}
	return out
}

// idleFromState: a ready (empty) machine has been idle since it last
// changed state.
func idleFromState(snap *snapshot) func(*view) map[string]time.Time {
	return func(v *view) map[string]time.Time {
		out := map[string]time.Time{}
		for _, m := range snap.machines {
			if pm, ok := v.machines[m.ID]; ok && pm.Joined && len(pm.Replicas) == 0 {
				out[m.ID] = m.StateChangedAt
			}
		}
		return out
	}
}
