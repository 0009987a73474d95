// Package planner decides how many machines each capacity group needs. It is
// a pure function of a snapshot: the replicas the scheduler could not place,
// the machines already on their way, and each group's bounds and shape.
package planner

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/scheduler"
)

// Group is one capacity group in the snapshot.
type Group struct {
	Cluster string
	ID      string
	MinSize int
	MaxSize int
	// Live counts machines that are launched or running and not going away.
	Live int
	// Pending are live machines that have not joined yet; they can take
	// replicas once they do, so the planner counts their capacity first.
	Pending []*scheduler.Machine
	// Template is a new machine of this group, as the scheduler would see it.
	Template     scheduler.Machine
	PricePerHour float64
}

// Machine is a joined machine considered for removal.
type Machine struct {
	ID       string
	Cluster  string
	Group    string
	Replicas int
	// IdleSince is when it last had a replica (or joined).
	IdleSince time.Time
}

// Config tunes the planner.
type Config struct {
	// EmptyMachineTTL is how long a machine must stay empty before it is
	// removed, so short gaps in demand do not churn machines.
	EmptyMachineTTL time.Duration
}

// Plan is what the fleet should do.
type Plan struct {
	// Desired machine count per group key (cluster/group).
	Desired map[string]int
	// Remove lists empty machines to drain and terminate.
	Remove []string
	// Unplaceable maps replicas no group can take to the reason.
	Unplaceable map[string]string
	// Added counts the machines each group needs for unplaced replicas
	// (the rest of its growth, if any, is for minSize).
	Added map[string]int
	// Launches explains each group's growth, for events.
	Launches map[string]string
}

// Key is a group's key in Plan maps.
func Key(cluster, group string) string { return cluster + "/" + group }

// Compute plans for the unplaced replicas.
func Compute(cfg Config, now time.Time, groups []*Group, unplaced []scheduler.Replica, machines []Machine) Plan {
	sort.Slice(groups, func(i, j int) bool {
		if groups[i].PricePerHour != groups[j].PricePerHour {
			return groups[i].PricePerHour < groups[j].PricePerHour
		}
		return Key(groups[i].Cluster, groups[i].ID) < Key(groups[j].Cluster, groups[j].ID)
	})
	p := Plan{Desired: map[string]int{}, Added: map[string]int{}, Unplaceable: map[string]string{}, Launches: map[string]string{}}
	added := map[string][]*scheduler.Machine{}
	waiting := map[string]int{}
	scheduler.SortReplicas(unplaced)
	for _, r := range unplaced {
		placeVirtually(r, groups, added, waiting, &p)
	}
	pendingInGroup := map[string]bool{}
	for _, g := range groups {
		key := Key(g.Cluster, g.ID)
		desired := g.Live + len(added[key])
		if desired < g.MinSize {
			desired = g.MinSize
		}
		if desired > g.MaxSize {
			desired = g.MaxSize
		}
		p.Desired[key] = desired
		p.Added[key] = len(added[key])
		if n := len(added[key]); n > 0 {
			p.Launches[key] = fmt.Sprintf("%d pending replica(s) need %d more machine(s)", waiting[key], n)
		}
		pendingInGroup[key] = len(added[key]) > 0 || waiting[key] > 0
	}
	p.Remove = removable(cfg, now, groups, machines, pendingInGroup, len(unplaced) > 0)
	return p
}

// placeVirtually puts a replica on a machine that is on its way, or on a
// new machine of the cheapest group that can hold it and is below maxSize.
func placeVirtually(r scheduler.Replica, groups []*Group, added map[string][]*scheduler.Machine, waiting map[string]int, p *Plan) {
	var reasons []string
	for _, g := range groups {
		key := Key(g.Cluster, g.ID)
		for _, m := range append(g.Pending, added[key]...) {
			if scheduler.Fits(m, r) == "" {
				scheduler.Assign(m, r, nil)
				waiting[key]++
				return
			}
		}
		fresh := g.Template
		fresh.ServiceCount = nil
		if why := scheduler.Fits(&fresh, r); why != "" {
			if why != "other cluster" {
				reasons = append(reasons, fmt.Sprintf("group %s: %s on an empty machine", g.ID, why))
			}
			continue
		}
		if g.Live+len(added[key]) >= g.MaxSize {
			reasons = append(reasons, fmt.Sprintf("group %s is at maxSize %d", g.ID, g.MaxSize))
			continue
		}
		fresh.ID = fmt.Sprintf("%s-new-%d", key, len(added[key]))
		scheduler.Assign(&fresh, r, nil)
		added[key] = append(added[key], &fresh)
		waiting[key]++
		return
	}
	if len(reasons) == 0 {
		reasons = append(reasons, "cluster "+r.Cluster+" has no capacity group")
	}
	p.Unplaceable[r.ID] = "no machine can be added: " + strings.Join(reasons, "; ")
}

// removable picks empty machines above minSize that have been empty long
// enough, never while replicas of the cluster wait for capacity.
func removable(cfg Config, now time.Time, groups []*Group, machines []Machine, pendingInGroup map[string]bool, anyUnplaced bool) []string {
	if anyUnplaced {
		return nil
	}
	live := map[string]int{}
	minSize := map[string]int{}
	for _, g := range groups {
		key := Key(g.Cluster, g.ID)
		live[key] = g.Live
		minSize[key] = g.MinSize
	}
	sort.Slice(machines, func(i, j int) bool { return machines[i].ID < machines[j].ID })
	var out []string
	for _, m := range machines {
		key := Key(m.Cluster, m.Group)
		if m.Replicas > 0 || pendingInGroup[key] || live[key] <= minSize[key] {
			continue
		}
		if now.Sub(m.IdleSince) < cfg.EmptyMachineTTL {
			continue
		}
		out = append(out, m.ID)
		live[key]--
	}
	return out
}

// Allocatable is a machine's hardware minus the cluster's system reserve.
func Allocatable(hardware, reserved api.Resources) api.Resources {
	a := hardware.Sub(reserved)
	if a.MilliCPU < 0 {
		a.MilliCPU = 0
	}
	if a.MemoryBytes < 0 {
		a.MemoryBytes = 0
	}
	if a.EphemeralBytes < 0 {
		a.EphemeralBytes = 0
	}
	return a
}
