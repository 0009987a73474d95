package planner

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/scheduler"
)

// Unavailable remembers offerings (instance type × zone × capacity type)
// that recently failed for lack of capacity, so the planner falls back to
// the next cheapest for a while.
type Unavailable struct {
	ttl   time.Duration
	mu    sync.Mutex
	until map[string]time.Time
}

// NewUnavailable remembers each miss for ttl.
func NewUnavailable(ttl time.Duration) *Unavailable {
	return &Unavailable{ttl: ttl, until: map[string]time.Time{}}
}

func offeringKey(instanceType, zone, capacityType string) string {
	return instanceType + "|" + zone + "|" + capacityType
}

// Mark records a capacity miss.
func (u *Unavailable) Mark(instanceType, zone, capacityType string, now time.Time) {
	if u == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.until[offeringKey(instanceType, zone, capacityType)] = now.Add(u.ttl)
}

// Is reports whether the offering is still remembered as unavailable.
func (u *Unavailable) Is(instanceType, zone, capacityType string, now time.Time) bool {
	if u == nil {
		return false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	key := offeringKey(instanceType, zone, capacityType)
	t, ok := u.until[key]
	if ok && !now.Before(t) {
		delete(u.until, key)
		return false
	}
	return ok
}

// candidate is one offering a group may launch, with its allocatable.
type candidate struct {
	group    *Group
	itype    provisioner.InstanceType
	offering provisioner.Offering
	alloc    api.Resources
	unitCost float64
}

// offeringIndex ranks each cluster's offerings by price per unit of the
// cluster's pending demand: one list for replicas without GPUs, one for
// replicas that require them.
type offeringIndex struct {
	plain, gpu map[string][]*candidate
	missing    map[string]string
}

func newOfferingIndex(groups []*Group, pending []scheduler.Replica, unavailable *Unavailable, now time.Time) *offeringIndex {
	plainDemand, gpuDemand := map[string]api.Resources{}, map[string]api.Resources{}
	for _, r := range pending {
		if needsGPUs(&r) {
			d := gpuDemand[r.Cluster].Add(r.Requests)
			d.GPUs += r.GPU.Count
			gpuDemand[r.Cluster] = d
		} else {
			plainDemand[r.Cluster] = plainDemand[r.Cluster].Add(r.Requests)
		}
	}
	idx := &offeringIndex{plain: map[string][]*candidate{}, gpu: map[string][]*candidate{}, missing: map[string]string{}}
	for _, g := range groups {
		for _, it := range g.Types {
			alloc := Allocatable(capacityOf(it), g.Reserved)
			if alloc.MilliCPU == 0 || alloc.MemoryBytes == 0 {
				continue
			}
			for _, o := range it.Offerings {
				if !capacityTypeAllowed(g.CapacityType, o.CapacityType) || (len(g.Zones) > 0 && !contains(g.Zones, o.Zone)) {
					continue
				}
				if unavailable.Is(it.Name, o.Zone, o.CapacityType, now) {
					idx.missing[g.Cluster] = "some offerings are unavailable (insufficient capacity, remembered for a while)"
					continue
				}
				c := candidate{group: g, itype: it, offering: o, alloc: alloc}
				pc, gc := c, c
				pc.unitCost = unitCost(o.PricePerHour, alloc, plainDemand[g.Cluster])
				gc.unitCost = unitCost(o.PricePerHour, alloc, gpuDemand[g.Cluster])
				idx.plain[g.Cluster] = append(idx.plain[g.Cluster], &pc)
				idx.gpu[g.Cluster] = append(idx.gpu[g.Cluster], &gc)
			}
		}
	}
	for _, lists := range []map[string][]*candidate{idx.plain, idx.gpu} {
		for _, l := range lists {
			sortCandidates(l)
		}
	}
	return idx
}

func needsGPUs(r *scheduler.Replica) bool { return r.GPU != nil && !r.GPU.Preferred }

func capacityTypeAllowed(policy, offered string) bool {
	return policy == api.CapacityAny || policy == "" && offered == api.CapacityOnDemand || policy == offered
}

// unitCost is the price per fraction of the demand the machine could hold
// (fluid): a machine that holds 10% of the demand for $1 costs $10/unit.
func unitCost(price float64, alloc, demand api.Resources) float64 {
	frac := math.Inf(1)
	for _, d := range [][2]float64{
		{float64(alloc.MilliCPU), float64(demand.MilliCPU)},
		{float64(alloc.MemoryBytes), float64(demand.MemoryBytes)},
		{float64(alloc.EphemeralBytes), float64(demand.EphemeralBytes)},
		{float64(alloc.GPUs), float64(demand.GPUs)},
	} {
		if d[1] > 0 {
			frac = math.Min(frac, d[0]/d[1])
		}
	}
	if math.IsInf(frac, 1) {
		return price
	}
	if frac == 0 {
		return math.Inf(1)
	}
	return price / frac
}

// sortCandidates: cheapest per unit first; among equals the larger machine
// (less fragmentation; right-sizing shrinks the last one), then names.
func sortCandidates(l []*candidate) {
	sort.Slice(l, func(i, j int) bool {
		a, b := l[i], l[j]
		switch {
		case a.unitCost != b.unitCost:
			return a.unitCost < b.unitCost
		case a.alloc.MilliCPU != b.alloc.MilliCPU:
			return a.alloc.MilliCPU > b.alloc.MilliCPU
		case a.offering.PricePerHour != b.offering.PricePerHour:
			return a.offering.PricePerHour < b.offering.PricePerHour
		case a.group.ID != b.group.ID:
			return a.group.ID < b.group.ID
		case a.itype.Name != b.itype.Name:
			return a.itype.Name < b.itype.Name
		case a.offering.Zone != b.offering.Zone:
			return a.offering.Zone < b.offering.Zone
		}
		return a.offering.CapacityType < b.offering.CapacityType
	})
}

// best is the first ranked offering that can hold the replica.
func (idx *offeringIndex) best(r *scheduler.Replica, zoneHint string, hasRoom func(*Group) bool) (*candidate, string) {
	list := idx.plain[r.Cluster]
	if needsGPUs(r) {
		list = idx.gpu[r.Cluster]
	}
	whyNot := map[string]bool{}
	for _, c := range list {
		switch {
		case zoneHint != "" && c.offering.Zone != zoneHint:
			whyNot["no offering in zone "+zoneHint] = true
		case !hasRoom(c.group):
			whyNot[fmt.Sprintf("group %s is at maxSize %d", c.group.ID, c.group.MaxSize)] = true
		default:
			if why := groupRefuses(c.group, r); why != "" {
				whyNot[why] = true
			} else if why := typeRefuses(c, r); why != "" {
				whyNot[why] = true
			} else {
				return c, ""
			}
		}
	}
	if len(list) == 0 {
		whyNot["cluster "+r.Cluster+" has no launchable offering"] = true
	}
	if m := idx.missing[r.Cluster]; m != "" {
		whyNot[m] = true
	}
	reasons := make([]string, 0, len(whyNot))
	for w := range whyNot {
		reasons = append(reasons, w)
	}
	sort.Strings(reasons)
	return nil, "no machine can be added: " + strings.Join(reasons, "; ")
}

func groupRefuses(g *Group, r *scheduler.Replica) string {
	switch {
	case len(r.Groups) > 0 && !contains(r.Groups, g.ID):
		return "pinned to groups " + strings.Join(r.Groups, ",")
	case !contains(g.Runtimes, r.Runtime):
		return fmt.Sprintf("group %s machines have no %s runtime", g.ID, r.Runtime)
	case r.Isolation == api.IsolationTEERequired && !g.TEE:
		return fmt.Sprintf("no TEE runtime in cluster %s (isolation teeRequired: prerequisite missing)", g.Cluster)
	}
	for k, v := range r.NodeSelector {
		if g.Labels[k] != v {
			return fmt.Sprintf("group %s labels do not match nodeSelector", g.ID)
		}
	}
	return ""
}

func typeRefuses(c *candidate, r *scheduler.Replica) string {
	if !c.alloc.Fits(api.Resources{MilliCPU: r.Requests.MilliCPU, MemoryBytes: r.Requests.MemoryBytes, EphemeralBytes: r.Requests.EphemeralBytes}) {
		return fmt.Sprintf("no instance type of group %s is large enough", c.group.ID)
	}
	if needsGPUs(r) {
		n := 0
		for _, g := range c.itype.GPUs {
			if (r.GPU.Type == "" || g.Type == r.GPU.Type) && g.VRAMGB >= r.GPU.MinVRAMGB {
				n += g.Count
			}
		}
		if n < r.GPU.Count {
			return fmt.Sprintf("no instance type of group %s has %d matching GPUs", c.group.ID, r.GPU.Count)
		}
	}
	return ""
}

// cheapestHolding is the cheapest offering of the bin's group, zone and
// capacity policy that holds everything placed on it.
func (idx *offeringIndex) cheapestHolding(b *bin) *candidate {
	used := b.m.Allocated
	usedGPUs := usedGPUs(b.m)
	var gpuType string
	var gpuVRAM float64
	for _, g := range b.m.GPUs {
		if g.Used {
			gpuType, gpuVRAM = g.Type, math.Max(gpuVRAM, g.VRAMGB)
		}
	}
	var best *candidate
	for _, c := range idx.plain[b.group.Cluster] {
		if c.group != b.group || c.offering.Zone != b.offering.Zone {
			continue
		}
		if !c.alloc.Fits(api.Resources{MilliCPU: used.MilliCPU, MemoryBytes: used.MemoryBytes, EphemeralBytes: used.EphemeralBytes}) {
			continue
		}
		if usedGPUs > 0 {
			n := 0
			for _, g := range c.itype.GPUs {
				if g.Type == gpuType && g.VRAMGB >= gpuVRAM {
					n += g.Count
				}
			}
			if n < usedGPUs || len(c.itype.GPUs) != 1 {
				continue // keep device indexes valid: one GPU kind, enough of it
			}
		}
		if best == nil || c.offering.PricePerHour < best.offering.PricePerHour {
			best = c
		}
	}
	return best
}

// cheapestFor is a group's cheapest offering, for empty machines.
func (idx *offeringIndex) cheapestFor(g *Group) *candidate {
	var best *candidate
	for _, c := range idx.plain[g.Cluster] {
		if c.group == g && (best == nil || c.offering.PricePerHour < best.offering.PricePerHour) {
			best = c
		}
	}
	return best
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
