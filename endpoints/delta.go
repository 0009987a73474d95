package endpoints

import (
	"fmt"
	"reflect"
	"slices"
	"sort"

	"github.com/gantry-dev/gantry/api"
)

// Parts of a cluster's names a delta can leave as they were.
const (
	keptIngress    = "ingress"
	keptEdgeGroups = "edgeGroups"
	keptMesh       = "mesh"
)

// Diff is what turns base into cur: the records whose targets changed,
// each with the targets added or changed and the replicas gone, the
// records gone, and the other parts only when they changed. An agent
// holding base applies it (Apply) instead of reading every name again:
// at 10,000 machines a change of one replica is a few hundred bytes per
// agent, not the cluster's megabytes.
func Diff(base, cur api.ClusterNames) api.ClusterNames {
	out := api.ClusterNames{Cluster: cur.Cluster, Version: cur.Version, Base: base.Version, Records: []api.NameRecord{}}
	before := make(map[string]api.NameRecord, len(base.Records))
	for _, r := range base.Records {
		before[r.Name] = r
	}
	for _, r := range cur.Records {
		old, had := before[r.Name]
		delete(before, r.Name)
		if !had {
			out.Records = append(out.Records, r)
			continue
		}
		if d, changed := diffRecord(old, r); changed {
			out.Records = append(out.Records, d)
		}
	}
	for name := range before {
		out.RemovedRecords = append(out.RemovedRecords, name)
	}
	sort.Strings(out.RemovedRecords)
	if reflect.DeepEqual(base.Ingress, cur.Ingress) {
		out.Kept = append(out.Kept, keptIngress)
	} else {
		out.Ingress = cur.Ingress
	}
	if reflect.DeepEqual(base.EdgeGroups, cur.EdgeGroups) {
		out.Kept = append(out.Kept, keptEdgeGroups)
	} else {
		out.EdgeGroups = cur.EdgeGroups
	}
	if reflect.DeepEqual(base.Mesh, cur.Mesh) {
		out.Kept = append(out.Kept, keptMesh)
	} else {
		out.Mesh = cur.Mesh
	}
	return out
}

func diffRecord(old, cur api.NameRecord) (api.NameRecord, bool) {
	out := api.NameRecord{Name: cur.Name, Targets: []api.Endpoint{}}
	before := make(map[string]api.Endpoint, len(old.Targets))
	for _, t := range old.Targets {
		before[t.Replica] = t
	}
	for _, t := range cur.Targets {
		prev, had := before[t.Replica]
		delete(before, t.Replica)
		if !had || !reflect.DeepEqual(prev, t) {
			out.Targets = append(out.Targets, t)
		}
	}
	for replica := range before {
		out.Removed = append(out.Removed, replica)
	}
	sort.Strings(out.Removed)
	return out, len(out.Targets) > 0 || len(out.Removed) > 0
}

// Apply turns base into the names a delta (made by Diff from base) leads
// to, and checks the result against the delta's version: an error means
// the caller should read the names whole.
func Apply(base, delta api.ClusterNames) (api.ClusterNames, error) {
	if delta.Base != base.Version {
		return api.ClusterNames{}, fmt.Errorf("names delta from version %s, holding %s", delta.Base, base.Version)
	}
	out := api.ClusterNames{Cluster: delta.Cluster, Records: []api.NameRecord{}, Ingress: delta.Ingress, EdgeGroups: delta.EdgeGroups, Mesh: delta.Mesh}
	if slices.Contains(delta.Kept, keptIngress) {
		out.Ingress = base.Ingress
	}
	if slices.Contains(delta.Kept, keptEdgeGroups) {
		out.EdgeGroups = base.EdgeGroups
	}
	if slices.Contains(delta.Kept, keptMesh) {
		out.Mesh = base.Mesh
	}
	changed := make(map[string]api.NameRecord, len(delta.Records))
	for _, r := range delta.Records {
		changed[r.Name] = r
	}
	removed := setOf(delta.RemovedRecords)
	for _, r := range base.Records {
		if removed[r.Name] {
			continue
		}
		if d, ok := changed[r.Name]; ok {
			r = applyRecord(r, d)
			delete(changed, r.Name)
		}
		out.Records = append(out.Records, r)
	}
	for _, r := range changed {
		out.Records = append(out.Records, applyRecord(api.NameRecord{Name: r.Name}, r))
	}
	sort.Slice(out.Records, func(i, j int) bool { return out.Records[i].Name < out.Records[j].Name })
	out.Version = Version(out)
	if out.Version != delta.Version {
		return api.ClusterNames{}, fmt.Errorf("names delta to version %s gave %s", delta.Version, out.Version)
	}
	return out, nil
}

func applyRecord(base, d api.NameRecord) api.NameRecord {
	out := api.NameRecord{Name: base.Name, Targets: []api.Endpoint{}}
	replaced := make(map[string]api.Endpoint, len(d.Targets))
	for _, t := range d.Targets {
		replaced[t.Replica] = t
	}
	removed := setOf(d.Removed)
	for _, t := range base.Targets {
		if removed[t.Replica] {
			continue
		}
		if n, ok := replaced[t.Replica]; ok {
			t = n
			delete(replaced, t.Replica)
		}
		out.Targets = append(out.Targets, t)
	}
	for _, t := range d.Targets {
		if _, ok := replaced[t.Replica]; ok {
			out.Targets = append(out.Targets, t)
		}
	}
	sortTargets(out.Targets)
	return out
}

// sortTargets puts a record's targets in their one order (by replica),
// which Apply reproduces.
func sortTargets(targets []api.Endpoint) {
	sort.Slice(targets, func(i, j int) bool { return targets[i].Replica < targets[j].Replica })
}

func setOf(keys []string) map[string]bool {
	out := make(map[string]bool, len(keys))
	for _, k := range keys {
		out[k] = true
	}
	return out
}
