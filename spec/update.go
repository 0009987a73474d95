package spec

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	"github.com/gantry-dev/gantry/api"
)

// CheckClusterUpdate enforces the update rules between a stored cluster and
// its replacement (both defaulted).
func CheckClusterUpdate(old, updated *api.Cluster) ErrorList {
	var errs ErrorList
	if old.Metadata.Name != updated.Metadata.Name {
		errs.add("metadata.name", "cluster name is immutable (was %q)", old.Metadata.Name)
	}
	if old.Spec.ContainerCIDR != "" && old.Spec.ContainerCIDR != updated.Spec.ContainerCIDR {
		errs.add("spec.containerCidr", "immutable once set (was %q)", old.Spec.ContainerCIDR)
	}
	previous := map[string]api.CapacityGroup{}
	for _, g := range old.Spec.CapacityGroups {
		previous[g.GroupID] = g
	}
	for i, g := range updated.Spec.CapacityGroups {
		if p, ok := previous[g.GroupID]; ok && p.InstanceType != g.InstanceType {
			errs.add(indexPath("spec.capacityGroups", i)+".instanceType",
				"the instance type of existing group %q is immutable (was %q); add a new group instead", g.GroupID, p.InstanceType)
		}
	}
	return errs
}

// CheckServiceUpdate enforces the update rules of a service.
func CheckServiceUpdate(old, updated *api.Service) ErrorList {
	var errs ErrorList
	if old.Metadata.Name != updated.Metadata.Name {
		errs.add("metadata.name", "service name is immutable (was %q)", old.Metadata.Name)
	}
	return errs
}

// Changes lists the fields that differ between two versions of a resource,
// as "path: old → new", in path order.
func Changes(old, updated any) []string {
	var a, b any
	mustRoundTrip(old, &a)
	mustRoundTrip(updated, &b)
	var out []string
	diffTrees("", a, b, &out)
	sort.Strings(out)
	return out
}

func mustRoundTrip(v any, into *any) {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("spec: marshal %T: %v", v, err)) // our own types always marshal
	}
	_ = json.Unmarshal(data, into)
}

func diffTrees(path string, a, b any, out *[]string) {
	am, aIsMap := a.(map[string]any)
	bm, bIsMap := b.(map[string]any)
	if aIsMap && bIsMap {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for k := range keys {
			diffTrees(childPath(path, k), am[k], bm[k], out)
		}
		return
	}
	if reflect.DeepEqual(a, b) {
		return
	}
	*out = append(*out, fmt.Sprintf("%s: %s → %s", path, short(a), short(b)))
}

func short(v any) string {
	if v == nil {
		return "(none)"
	}
	data, _ := json.Marshal(v)
	if len(data) > 60 {
		return string(data[:57]) + "..."
	}
	return string(data)
}
