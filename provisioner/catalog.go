package provisioner

import (
	"fmt"
	"sort"

	"github.com/gantry-dev/gantry/api"
)

// The instance types a capacity group may launch, from its provider's
// catalog: what the planner plans with and what apply checks against.

// ResolveType picks a group's instance type: the named one; else the
// cheapest catalog type that satisfies the group's profile; else (a
// flexible group) the cheapest type of the catalog.
func ResolveType(catalog []InstanceType, g api.CapacityGroup) (InstanceType, error) {
	if g.InstanceType != "" {
		it, ok := FindInstanceType(catalog, g.InstanceType)
		if !ok {
			return it, fmt.Errorf("instance type %q is not in the provider's catalog", g.InstanceType)
		}
		return it, nil
	}
	candidates := make([]InstanceType, 0, len(catalog))
	for _, it := range catalog {
		if _, priced := it.CheapestPrice(); priced && satisfiesProfile(it, g.Profile) {
			candidates = append(candidates, it)
		}
	}
	if len(candidates) == 0 {
		return InstanceType{}, fmt.Errorf("no catalog instance type satisfies the profile of group %q", g.GroupID)
	}
	sort.SliceStable(candidates, func(i, j int) bool {
		pi, _ := candidates[i].CheapestPrice()
		pj, _ := candidates[j].CheapestPrice()
		if pi != pj {
			return pi < pj
		}
		return candidates[i].Name < candidates[j].Name
	})
	return candidates[0], nil
}

func satisfiesProfile(it InstanceType, p *api.MachineProfile) bool {
	if p == nil {
		return true
	}
	milli, err := api.ParseCPU(p.CPU)
	if err != nil || it.MilliCPU < milli || it.MemoryBytes < p.MemoryBytes || it.EphemeralBytes < p.EphemeralStorageBytes {
		return false
	}
	if p.GPU != nil {
		n := 0
		for _, g := range it.GPUs {
			if g.Type == p.GPU.Type {
				n += g.Count
			}
		}
		return n >= p.GPU.Count
	}
	return true
}

// GroupTypes are the instance types a capacity group may launch: its
// instanceType; else the cheapest type satisfying its profile; else (a
// flexible group) the whole catalog.
func GroupTypes(catalog []InstanceType, g api.CapacityGroup) ([]InstanceType, error) {
	if g.InstanceType == "" && g.Profile == nil {
		if len(catalog) == 0 {
			return nil, fmt.Errorf("the provider's catalog is empty")
		}
		return catalog, nil
	}
	it, err := ResolveType(catalog, g)
	if err != nil {
		return nil, err
	}
	return []InstanceType{it}, nil
}
