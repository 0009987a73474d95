package planner

import (
	"cmp"
	"slices"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/scheduler"
)

// apartGroup names the replicas no two of which may share a machine, as
// the bound counts them: a dedicated service's replicas, or the replicas
// that match a selector and carry a required anti-affinity on machine or
// zone with it (their own service's or a tier's of many services: each
// keeps every other off its machine; apart in zones is apart on machines
// too). "" for a replica in no such group. A
// replica in several is counted in one (the first selector in order):
// every group the bound counts must be one whose members are pairwise
// apart, not every group a replica is in.
func apartGroup(r *scheduler.Replica) string {
	if r.Dedicated {
		return "dedicated " + r.Service
	}
	if sel := apartSelector(r, true); sel != "" {
		return "apart " + sel
	}
	return ""
}

// apartSelector is the first (in order) selector of r's required
// anti-affinity terms on machine (or zone, when zonesToo) that selects r
// itself ("": none).
func apartSelector(r *scheduler.Replica, zonesToo bool) string {
	if r.Terms == nil {
		return ""
	}
	first := ""
	for _, t := range r.Terms.AntiAffinity {
		onTopology := t.Topology == api.SpreadMachine || zonesToo && t.Topology == api.SpreadZone
		if t.Required() && onTopology && api.LabelsMatch(r.Labels, t.Selector) {
			if key := api.SelectorString(t.Selector); first == "" || key < first {
				first = key
			}
		}
	}
	return first
}

// selfExclusive: a required anti-affinity on machine that selects the
// replica's own labels (it and the replicas like it keep apart).
func selfExclusive(r *scheduler.Replica) bool { return apartSelector(r, false) != "" }

// apartGroups are rs's apart groups, each its members' indexes, the
// largest first (then by name).
func apartGroups(rs []scheduler.Replica) [][]int {
	byGroup := map[string][]int{}
	var names []string
	for i := range rs {
		if g := apartGroup(&rs[i]); g != "" {
			if _, ok := byGroup[g]; !ok {
				names = append(names, g)
			}
			byGroup[g] = append(byGroup[g], i)
		}
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(len(byGroup[b]), len(byGroup[a])), cmp.Compare(a, b)) })
	out := make([][]int, len(names))
	for i, n := range names {
		out[i] = byGroup[n]
	}
	return out
}

// apartShapeLimit bounds the rows the bound adds for the largest apart
// group's shapes (an LP row each).
const apartShapeLimit = 32

// apartRows are rows of the bound for the largest apart group (groups:
// apartGroups, the largest first): its
// replicas each need a machine of their own that holds them, so for each
// of its request shapes q, the machines that hold q number at least its
// members that ask q or more in every resource. need is that count, holds
// whether a column's machine holds q. The largest shapes are kept when
// there are more than apartShapeLimit.
func apartRows(rs []scheduler.Replica, groups [][]int) (need []int, shapes []api.Resources) {
	if len(groups) == 0 {
		return nil, nil
	}
	members := groups[0]
	seen := map[api.Resources]bool{}
	for _, i := range members {
		if q := rs[i].Requests; !seen[q] {
			seen[q] = true
			shapes = append(shapes, q)
		}
	}
	slices.SortFunc(shapes, func(a, b api.Resources) int {
		return cmp.Or(cmp.Compare(b.MilliCPU, a.MilliCPU), cmp.Compare(b.MemoryBytes, a.MemoryBytes), cmp.Compare(b.EphemeralBytes, a.EphemeralBytes), cmp.Compare(b.GPUs, a.GPUs))
	})
	shapes = shapes[:min(len(shapes), apartShapeLimit)]
	need = make([]int, len(shapes))
	for k, q := range shapes {
		for _, i := range members {
			if rs[i].Requests.Fits(q) {
				need[k]++
			}
		}
	}
	return need, shapes
}
