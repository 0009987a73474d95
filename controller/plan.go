package controller

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/scheduler"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// RuntimesOf is what the machines of a provider offer before they report
// their own inventory.
func RuntimesOf(provider string) []string {
	if provider == "local" {
		return []string{scheduler.RuntimeProcess}
	}
	return []string{scheduler.RuntimeDocker}
}

type plannedGroup struct {
	cluster *api.Cluster
	group   api.CapacityGroup
	itype   provisioner.InstanceType
	pg      *planner.Group
}

// plan sizes every group, launches what is missing, removes what is idle,
// and terminates machines of groups that no longer exist.
func (c *Controller) plan(ctx context.Context, snap *snapshot, schedReasons map[string]string, unplaced []scheduler.Replica, now time.Time) error {
	groups, typeErrs := c.plannedGroups(snap)
	pgs := make([]*planner.Group, 0, len(groups))
	for _, g := range groups {
		pgs = append(pgs, g.pg)
	}
	p := planner.Compute(c.cfg.Planner, now, pgs, unplaced, c.idleMachines(snap, now))

	reasons := map[string]string{}
	for id, why := range schedReasons {
		if more, ok := p.Unplaceable[id]; ok {
			reasons[id] = why + "; " + more
		} else {
			reasons[id] = "waiting for a new machine (" + why + ")"
		}
	}
	if err := c.store.Update(ctx, func(tx store.Tx) error { return setPendingReasons(tx, reasons) }); err != nil {
		return err
	}
	for key, err := range typeErrs {
		c.log.Warn("capacity group has no usable instance type", "group", key, "err", err)
	}
	c.mu.Lock()
	c.desired = p.Desired
	c.mu.Unlock()
	for _, g := range groups {
		c.grow(ctx, g, p, now)
	}
	for _, id := range p.Remove {
		_ = c.fleet.Terminate(ctx, id, fmt.Sprintf("empty for more than %s and above minSize", c.cfg.Planner.EmptyMachineTTL))
	}
	c.removeOrphanedGroups(ctx, snap, groups)
	return nil
}

func (c *Controller) plannedGroups(snap *snapshot) ([]*plannedGroup, map[string]error) {
	var out []*plannedGroup
	errs := map[string]error{}
	names := make([]string, 0, len(snap.clusters))
	for name := range snap.clusters {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		cl := snap.clusters[name]
		prov, ok := c.providers[cl.Spec.Provider.Name]
		if !ok {
			continue
		}
		reserved := spec.Reserved(cl.Spec.SystemReserved)
		for _, g := range cl.Spec.CapacityGroups {
			it, err := planner.ResolveType(prov.InstanceTypes(), g)
			if err != nil {
				errs[planner.Key(name, g.GroupID)] = err
				continue
			}
			price, _ := it.CheapestPrice()
			pg := &planner.Group{Cluster: name, ID: g.GroupID, MinSize: g.MinSize, MaxSize: g.MaxSize, PricePerHour: price,
				Template: scheduler.Machine{Cluster: name, Group: g.GroupID, Labels: g.Labels, Runtimes: RuntimesOf(cl.Spec.Provider.Name),
					Allocatable: planner.Allocatable(capacityOf(it), reserved)}}
			for _, m := range snap.machines {
				if m.Cluster != name || m.Group != g.GroupID || !m.Live() || m.FleetState == api.FleetTerminating {
					continue
				}
				pg.Live++
				if m.JoinState != api.JoinJoined {
					tm := pg.Template
					tm.ID = m.ID
					pg.Pending = append(pg.Pending, &tm)
				}
			}
			out = append(out, &plannedGroup{cluster: cl, group: g, itype: it, pg: pg})
		}
	}
	return out, errs
}

func capacityOf(it provisioner.InstanceType) api.Resources {
	return api.Resources{MilliCPU: it.MilliCPU, MemoryBytes: it.MemoryBytes, EphemeralBytes: it.EphemeralBytes, GPUs: it.GPUCount()}
}

// idleMachines lists joined machines for the planner's removal check,
// remembering since when each has been empty.
func (c *Controller) idleMachines(snap *snapshot, now time.Time) []planner.Machine {
	count := map[string]int{}
	for _, r := range snap.replicas {
		if r.Machine != "" {
			count[r.Machine]++
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []planner.Machine
	seen := map[string]bool{}
	for _, m := range snap.machines {
		if !m.Schedulable() {
			continue
		}
		seen[m.ID] = true
		if count[m.ID] > 0 {
			delete(c.idleSince, m.ID)
		} else if _, ok := c.idleSince[m.ID]; !ok {
			c.idleSince[m.ID] = now
		}
		idle, ok := c.idleSince[m.ID]
		if !ok {
			idle = now
		}
		out = append(out, planner.Machine{ID: m.ID, Cluster: m.Cluster, Group: m.Group, Replicas: count[m.ID], IdleSince: idle})
	}
	for id := range c.idleSince {
		if !seen[id] {
			delete(c.idleSince, id)
		}
	}
	return out
}

// grow launches the machines a group is missing, backing off after
// failures so a broken provider is not hammered.
func (c *Controller) grow(ctx context.Context, g *plannedGroup, p planner.Plan, now time.Time) {
	key := planner.Key(g.pg.Cluster, g.pg.ID)
	missing := p.Desired[key] - g.pg.Live
	c.mu.Lock()
	failure := c.failures[key]
	c.mu.Unlock()
	if missing <= 0 || now.Before(failure.until) {
		return
	}
	forDemand := p.Added[key]
	for i := 0; i < missing; i++ {
		reason := fmt.Sprintf("group has %d machine(s), minSize is %d", g.pg.Live+i, g.group.MinSize)
		if i < forDemand {
			reason = p.Launches[key]
		}
		if err := c.fleet.Launch(ctx, g.cluster, g.group, g.itype, reason); err != nil {
			c.recordLaunchFailure(key, now)
			c.log.Warn("launch failed", "group", key, "err", err)
			return
		}
	}
	c.mu.Lock()
	delete(c.failures, key)
	c.mu.Unlock()
}

func (c *Controller) recordLaunchFailure(key string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.failures[key]
	wait := c.cfg.LaunchBackoff << f.count
	if wait > c.cfg.MaxLaunchBackoff || wait <= 0 {
		wait = c.cfg.MaxLaunchBackoff
	}
	c.failures[key] = launchFailure{count: f.count + 1, until: now.Add(wait)}
}

// removeOrphanedGroups terminates machines whose cluster or group is gone.
func (c *Controller) removeOrphanedGroups(ctx context.Context, snap *snapshot, groups []*plannedGroup) {
	exists := map[string]bool{}
	for _, cl := range snap.clusters {
		for _, g := range cl.Spec.CapacityGroups {
			exists[planner.Key(cl.Metadata.Name, g.GroupID)] = true
		}
	}
	for _, m := range snap.machines {
		if m.Live() && m.FleetState != api.FleetTerminating && !exists[planner.Key(m.Cluster, m.Group)] {
			_ = c.fleet.Terminate(ctx, m.ID, "its cluster or capacity group was removed from the spec")
		}
	}
}
