package planner

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/scheduler"
)

// Unavailable are offerings (instance type × zone × capacity type) that
// recently failed for lack of capacity, each with the time until which the
// planner falls back to the next cheapest (keys from OfferingKey).
type Unavailable map[string]time.Time

// OfferingKey names an offering in Unavailable.
func OfferingKey(instanceType, zone, capacityType string) string {
	return instanceType + "|" + zone + "|" + capacityType
}

// Is reports whether the offering is still avoided at now.
func (u Unavailable) Is(instanceType, zone, capacityType string, now time.Time) bool {
	until, ok := u[OfferingKey(instanceType, zone, capacityType)]
	return ok && now.Before(until)
}

// candidate is one offering a group may launch, with its allocatable.
type candidate struct {
	group    *Group
	itype    provisioner.InstanceType
	offering provisioner.Offering
	alloc    api.Resources
	unitCost float64
	// prototype is an empty machine of the offering: the scheduler's own
	// checks say whether a replica could go on it.
	prototype *scheduler.Machine
}

// empty is the candidate's prototype, made on first use.
func (c *candidate) empty() *scheduler.Machine {
	if c.prototype == nil {
		c.prototype = newMachine("prototype", c.group, c.itype, c.offering)
	}
	return c.prototype
}

// offeringIndex ranks each cluster's offerings by price per unit of the
// cluster's pending demand: one list for replicas without GPUs, one for
// replicas that require them.
type offeringIndex struct {
	plain, gpu map[string][]*candidate
	missing    map[string]string
}

func newOfferingIndex(groups []*Group, pending []scheduler.Replica, unavailable Unavailable, now time.Time) *offeringIndex {
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
	offerings := 0
	for _, g := range groups {
		for _, it := range g.Types {
			offerings += len(it.Offerings)
		}
	}
	// Every candidate in one allocation, never grown (the index points
	// into it): two for each offering at most.
	store := make([]candidate, 0, 2*offerings)
	for _, g := range groups {
		for _, it := range g.Types {
			alloc := api.Allocatable(it.Resources(), g.Reserved)
			if alloc.MilliCPU == 0 || alloc.MemoryBytes == 0 {
				continue
			}
			for _, o := range it.Offerings {
				if !capacityTypeAllowed(g.CapacityType, o.CapacityType) || (len(g.Zones) > 0 && !slices.Contains(g.Zones, o.Zone)) {
					continue
				}
				if unavailable.Is(it.Name, o.Zone, o.CapacityType, now) {
					idx.missing[g.Cluster] = "some offerings are unavailable (insufficient capacity, remembered for a while)"
					continue
				}
				c := candidate{group: g, itype: it, offering: o, alloc: alloc}
				c.unitCost = unitCost(o.PricePerHour, alloc, plainDemand[g.Cluster])
				store = append(store, c)
				idx.plain[g.Cluster] = append(idx.plain[g.Cluster], &store[len(store)-1])
				c.unitCost = unitCost(o.PricePerHour, alloc, gpuDemand[g.Cluster])
				store = append(store, c)
				idx.gpu[g.Cluster] = append(idx.gpu[g.Cluster], &store[len(store)-1])
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
	// passing: a miss that may pass by itself (a group's room, a zone, an
	// offering out of capacity); without one, no machine the cluster can
	// launch would ever hold the replica.
	passing := false
	for _, c := range list {
		switch {
		case zoneHint != "" && c.offering.Zone != zoneHint:
			whyNot["no offering in zone "+zoneHint], passing = true, true
		case !hasRoom(c.group):
			whyNot[fmt.Sprintf("group %s is at maxSize %d", c.group.ID, c.group.MaxSize)], passing = true, true
		default:
			why := scheduler.Fits(c.empty(), *r)
			if why == "" {
				return c, ""
			}
			whyNot[fmt.Sprintf("group %s: %s", c.group.ID, why)] = true
		}
	}
	if len(list) == 0 { // machines may still join by hand
		whyNot["cluster "+r.Cluster+" has no launchable offering"], passing = true, true
	}
	if m := idx.missing[r.Cluster]; m != "" {
		whyNot[m], passing = true, true
	}
	reasons := make([]string, 0, len(whyNot))
	for w := range whyNot {
		reasons = append(reasons, w)
	}
	sort.Strings(reasons)
	why := "no machine can be added: " + strings.Join(reasons, "; ")
	if !passing {
		why = api.ReasonUnschedulable + why
	}
	return nil, why
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
