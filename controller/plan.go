package controller

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/scheduler"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// plan sizes every group through the planner, launches what it adds,
// removes what it consolidates, and terminates machines of groups that no
// longer exist.
func (c *Controller) plan(ctx context.Context, snap *snapshot, v *view, schedReasons map[string]string, unplaced []scheduler.Replica, now time.Time) error {
	groups, catalogs := plannerGroups(snap, c.catalogOf, c.cfg.RuntimesOf, c.log)
	machines := make([]*planner.Machine, 0, len(v.machines))
	for _, m := range v.machines {
		machines = append(machines, m)
	}
	sort.Slice(machines, func(i, j int) bool { return machines[i].ID < machines[j].ID })
	p := planner.Compute(c.cfg.Planner, planner.Input{Groups: groups, Machines: machines, Pending: unplaced, Unavailable: c.unavailable, Now: now,
		Subnets: subnetBudgets(snap)})
	if err := c.store.Update(ctx, func(tx store.Tx) error { return setPendingReasons(tx, pendingReasons(p, v, schedReasons)) }); err != nil {
		return err
	}
	c.mu.Lock()
	c.desired = p.Desired
	c.mu.Unlock()
	stopped := stoppedMachines(snap)
	for _, nm := range p.Add {
		key := planner.Key(nm.Cluster, nm.Group)
		if len(nm.Replicas) > 0 && len(stopped[key]) > 0 { // the warm pool first
			id := stopped[key][0]
			stopped[key] = stopped[key][1:]
			if err := c.fleet.Start(ctx, id, "scale-up: "+nm.Reason); err == nil {
				continue
			} else {
				c.log.Warn("start warm machine; launching instead", "machine", id, "err", err)
			}
		}
		c.launch(ctx, snap.clusters[nm.Cluster], nm, catalogs[nm.Cluster], now)
	}
	for _, r := range p.Remove {
		switch {
		case r.Stop:
			if err := c.fleet.Stop(ctx, r.MachineID, r.Reason); err != nil {
				c.log.Warn("stop idle machine", "machine", r.MachineID, "err", err)
			}
		case r.ReplacedBy == "": // a replaced machine goes once its successor took its replicas
			c.drain(ctx, r.MachineID, r.Reason, now)
		}
	}
	c.removeOrphanedGroups(ctx, snap)
	return nil
}

// stoppedMachines lists each group's stopped warm-pool machines.
func stoppedMachines(snap *snapshot) map[string][]string {
	out := map[string][]string{}
	for _, m := range snap.machines {
		if m.FleetState == api.FleetStopped {
			key := planner.Key(m.Cluster, m.Group)
			out[key] = append(out[key], m.ID)
		}
	}
	return out
}

// subnetBudgets: per cluster, the /24s of its containerCidr no live machine
// holds (a terminating machine still holds its own).
func subnetBudgets(snap *snapshot) map[string]planner.Subnets {
	out := map[string]planner.Subnets{}
	for name, cl := range snap.clusters {
		prefix, err := netip.ParsePrefix(cl.Spec.ContainerCIDR)
		if err != nil || prefix.Bits() > 24 {
			continue
		}
		held := 0
		for _, m := range snap.machines {
			if m.Cluster == name && m.Live() && m.Subnet != "" {
				held++
			}
		}
		out[name] = planner.Subnets{CIDR: cl.Spec.ContainerCIDR, Free: (1 << (24 - prefix.Bits())) - held}
	}
	return out
}

// pendingReasons explains every replica the scheduler could not place.
func pendingReasons(p planner.Plan, v *view, schedReasons map[string]string) map[string]string {
	reasons := map[string]string{}
	added := map[string]planner.NewMachine{}
	for _, nm := range p.Add {
		added[nm.Key] = nm
	}
	for _, pl := range p.Placements {
		if nm, ok := added[pl.Machine]; ok {
			reasons[pl.Replica] = fmt.Sprintf("waiting for a new %s machine in %s/%s", nm.InstanceType, nm.Group, nm.Zone)
		} else if m, ok := v.machines[pl.Machine]; ok && !m.Joined {
			reasons[pl.Replica] = "waiting for machine " + pl.Machine + " to join"
		}
	}
	for _, pr := range p.Pending {
		reasons[pr.Replica] = pr.Reason
	}
	for id, why := range schedReasons {
		if _, ok := reasons[id]; !ok {
			reasons[id] = why
		}
	}
	return reasons
}

// plannerGroups describes every capacity group to the planner, with the
// instance types it may launch: its instanceType; else the cheapest type
// satisfying its profile; else (a flexible group) the whole catalog.
func (c *Controller) catalogOf(ps api.ProviderSpec) ([]provisioner.InstanceType, bool) {
	_, p, err := c.providers.For(ps)
	if err != nil {
		return nil, false
	}
	return p.InstanceTypes(), true
}

// Catalogs looks up the instance-type catalog of a cluster's provider
// settings (offerings depend on the region).
type Catalogs func(p api.ProviderSpec) ([]provisioner.InstanceType, bool)

// ByName adapts a catalog lookup by provider name.
func ByName(lookup func(name string) ([]provisioner.InstanceType, bool)) Catalogs {
	return func(p api.ProviderSpec) ([]provisioner.InstanceType, bool) { return lookup(p.Name) }
}

func plannerGroups(snap *snapshot, catalogOf Catalogs, runtimesOf func(string) []string, log *slog.Logger) ([]*planner.Group, map[string][]provisioner.InstanceType) {
	var out []*planner.Group
	catalogs := map[string][]provisioner.InstanceType{}
	names := make([]string, 0, len(snap.clusters))
	for name := range snap.clusters {
		names = append(names, name)
	}
	sort.Strings(names)
	live, stopped := map[string]int{}, map[string]int{}
	for _, m := range snap.machines {
		if m.Live() && m.FleetState != api.FleetTerminating && m.UnreachableSince == nil {
			live[planner.Key(m.Cluster, m.Group)]++
		}
		if m.FleetState == api.FleetStopped {
			stopped[planner.Key(m.Cluster, m.Group)]++
		}
	}
	for _, name := range names {
		cl := snap.clusters[name]
		catalog, ok := catalogOf(cl.Spec.Provider)
		if !ok {
			continue
		}
		catalogs[name] = catalog
		for _, g := range cl.Spec.CapacityGroups {
			types, err := AllowedTypes(catalogs[name], g)
			if err != nil {
				log.Warn("capacity group has no usable instance type", "group", planner.Key(name, g.GroupID), "err", err)
				continue
			}
			out = append(out, &planner.Group{Cluster: name, ID: g.GroupID, MinSize: g.MinSize, MaxSize: g.MaxSize, WarmPool: g.WarmPool,
				CapacityType: g.CapacityType, Zones: g.Zones, Labels: g.Labels, Runtimes: runtimesOf(cl.Spec.Provider.Name),
				Reserved: spec.Reserved(cl.Spec.SystemReserved), Types: types, Live: live[planner.Key(name, g.GroupID)],
				WarmStopped: g.WarmPoolState == api.WarmStopped, Stopped: stopped[planner.Key(name, g.GroupID)]})
		}
	}
	return out, catalogs
}

// AllowedTypes are the instance types a capacity group may launch.
func AllowedTypes(catalog []provisioner.InstanceType, g api.CapacityGroup) ([]provisioner.InstanceType, error) {
	if g.InstanceType == "" && g.Profile == nil {
		if len(catalog) == 0 {
			return nil, fmt.Errorf("the provider's catalog is empty")
		}
		return catalog, nil
	}
	it, err := planner.ResolveType(catalog, g)
	if err != nil {
		return nil, err
	}
	return []provisioner.InstanceType{it}, nil
}

// launch starts one planned machine; a capacity miss is remembered so the
// next plan picks another offering, and other failures back the group off.
func (c *Controller) launch(ctx context.Context, cl *api.Cluster, nm planner.NewMachine, catalog []provisioner.InstanceType, now time.Time) {
	key := planner.Key(nm.Cluster, nm.Group)
	c.mu.Lock()
	failure := c.failures[key]
	c.mu.Unlock()
	if cl == nil || now.Before(failure.until) {
		return
	}
	it, _ := provisioner.FindInstanceType(catalog, nm.InstanceType)
	var group api.CapacityGroup
	for _, g := range cl.Spec.CapacityGroups {
		if g.GroupID == nm.Group {
			group = g
		}
	}
	offering := provisioner.Offering{Zone: nm.Zone, CapacityType: nm.CapacityType, PricePerHour: nm.PricePerHour}
	err := c.fleet.Launch(ctx, cl, group, it, offering, nm.Reason)
	switch {
	case err == nil:
		c.mu.Lock()
		delete(c.failures, key)
		c.mu.Unlock()
		c.setProviderReady(ctx, nm.Cluster, true, "", now)
	case provisioner.KindOf(err) == provisioner.KindAuth:
		c.recordLaunchFailure(key, now)
		c.setProviderReady(ctx, nm.Cluster, false, err.Error(), now)
		c.log.Warn("provider refused the credentials; backing off", "group", key, "err", err)
	case provisioner.KindOf(err) == provisioner.KindInsufficientCapacity:
		c.unavailable.Mark(nm.InstanceType, nm.Zone, nm.CapacityType, now)
		c.log.Warn("offering out of capacity; trying another", "group", key, "instanceType", nm.InstanceType, "zone", nm.Zone, "capacityType", nm.CapacityType)
	default:
		c.recordLaunchFailure(key, now)
		c.log.Warn("launch failed", "group", key, "err", err)
	}
}

// drain starts draining a machine the planner removes: scale-in always
// drains first.
func (c *Controller) drain(ctx context.Context, id, reason string, now time.Time) {
	if err := c.fleet.Drain(ctx, id, reason, now.Add(c.cfg.DrainDeadline)); err != nil {
		c.log.Warn("drain", "machine", id, "err", err)
	}
}

// trackIdle remembers since when each joined machine has been empty.
func (c *Controller) trackIdle(v *view, now time.Time) map[string]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]time.Time{}
	for id, m := range v.machines {
		if !m.Joined {
			continue
		}
		if len(m.Replicas) > 0 {
			delete(c.idleSince, id)
			continue
		}
		if _, ok := c.idleSince[id]; !ok {
			c.idleSince[id] = now
		}
		out[id] = c.idleSince[id]
	}
	for id := range c.idleSince {
		if _, ok := v.machines[id]; !ok {
			delete(c.idleSince, id)
		}
	}
	return out
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
func (c *Controller) removeOrphanedGroups(ctx context.Context, snap *snapshot) {
	exists := map[string]bool{}
	for _, cl := range snap.clusters {
		for _, g := range cl.Spec.CapacityGroups {
			exists[planner.Key(cl.Metadata.Name, g.GroupID)] = true
		}
	}
	for _, m := range snap.machines {
		if m.Live() && m.FleetState != api.FleetTerminating && !exists[planner.Key(m.Cluster, m.Group)] {
			if m.FleetState != api.FleetDraining {
				c.drain(ctx, m.ID, "its cluster or capacity group was removed from the spec", time.Now())
			}
		}
	}
}
