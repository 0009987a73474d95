package view

import (
	"cmp"
	"maps"
	"slices"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/internal/chunks"
	"github.com/gantry-dev/gantry/store"
)

// workIndex is the replicas by machine: those placed on it, and those
// leaving it (a moving replica's old copy).
type workIndex struct {
	on, leaving map[string]map[string]*api.Replica
}

func newWorkIndex(replicas []*api.Replica) workIndex {
	w := workIndex{on: map[string]map[string]*api.Replica{}, leaving: map[string]map[string]*api.Replica{}}
	for _, r := range replicas {
		w.add(r)
	}
	return w
}

func (w workIndex) add(r *api.Replica) {
	if r != nil {
		indexAdd(w.on, r.Machine, r.ID, r)
		indexAdd(w.leaving, r.PreviousMachine, r.ID, r)
	}
}

func (w workIndex) remove(r *api.Replica) {
	if r != nil {
		indexRemove(w.on, r.Machine, r.ID)
		indexRemove(w.leaving, r.PreviousMachine, r.ID)
	}
}

// noteDraining follows whether the machine of that id drains.
func (v *View) noteDraining(id string) {
	if m := v.machines[id]; m != nil && m.FleetState == api.FleetDraining {
		v.draining[id] = true
	} else {
		delete(v.draining, id)
	}
}

// drainingHolds are the ids of the replicas on each draining machine or
// moving off it, sorted (decide.Snapshot.Draining).
func (v *View) drainingHolds() map[string][]string {
	out := make(map[string][]string, len(v.draining))
	for id := range v.draining {
		ids := make([]string, 0, len(v.work.on[id])+len(v.work.leaving[id]))
		ids = slices.AppendSeq(slices.AppendSeq(ids, maps.Keys(v.work.on[id])), maps.Keys(v.work.leaving[id]))
		slices.Sort(ids)
		out[id] = slices.Compact(ids)
	}
	return out
}

// indexAdd files obj under key (none for an empty key) by id.
func indexAdd[T any](index map[string]map[string]*T, key, id string, obj *T) {
	if key == "" {
		return
	}
	if index[key] == nil {
		index[key] = map[string]*T{}
	}
	index[key][id] = obj
}

func indexRemove[T any](index map[string]map[string]*T, key, id string) {
	delete(index[key], id)
	if len(index[key]) == 0 {
		delete(index, key)
	}
}

// Work is a live machine with the replicas on it and those leaving it,
// ordered by id, as the view holds them (shared: not to be changed).
type Work struct {
	Revision int64
	Machine  *api.Machine
	On       []*api.Replica
	Leaving  []*api.Replica
}

// Work reads a machine's work, as store.Tx.MachineWork does; false when
// the view is not loaded or holds no such live machine.
func (v *View) Work(id string) (Work, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	m := v.machines[id]
	if !v.loaded || m == nil {
		return Work{}, false
	}
	byID := func(a, b *api.Replica) int { return cmp.Compare(a.ID, b.ID) }
	return Work{Revision: v.rev, Machine: m, On: slices.SortedFunc(maps.Values(v.work.on[id]), byID),
		Leaving: slices.SortedFunc(maps.Values(v.work.leaving[id]), byID)}, true
}

// Allocated is what the replicas on each of the machines request, as
// the view holds them; false when the view is not loaded.
func (v *View) Allocated(ids []string) (map[string]api.Resources, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.loaded {
		return nil, false
	}
	out := make(map[string]api.Resources, len(ids))
	for _, id := range ids {
		var sum api.Resources
		for _, r := range v.work.on[id] {
			sum = sum.Add(r.Requests)
		}
		out[id] = sum
	}
	return out, true
}

// Revision is the revision the view has reached (0: not loaded).
func (v *View) Revision() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.loaded {
		return 0
	}
	return v.rev
}

// GetMemory reads an entry of the control loop's memory, as
// store.Tx.GetMemory does.
func (v *View) GetMemory(key string) (string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	value, ok := v.memory[key]
	if !v.loaded || !ok {
		return "", store.ErrNotFound
	}
	return value, nil
}

// GetService reads a service, as store.Tx.GetService does (shared: not
// to be changed).
func (v *View) GetService(name string) (*api.Service, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	svc := v.services[name]
	if !v.loaded || svc == nil {
		return nil, store.ErrNotFound
	}
	return svc, nil
}

// Follow brings the view to tx's snapshot, as Sync does, without making
// a snapshot of it; it returns the revision reached.
func (v *View) Follow(tx store.Tx) (int64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.update(tx); err != nil {
		v.loaded = false
		return 0, err
	}
	return v.rev, nil
}

// clusterIndex is the replicas and live machines by cluster.
type clusterIndex struct {
	replicas map[string]map[string]*api.Replica
	machines map[string]map[string]*api.Machine
}

func newClusterIndex(replicas []*api.Replica, machines []*api.Machine) clusterIndex {
	c := clusterIndex{replicas: map[string]map[string]*api.Replica{}, machines: map[string]map[string]*api.Machine{}}
	for _, r := range replicas {
		c.addReplica(r)
	}
	for _, m := range machines {
		c.addMachine(m)
	}
	return c
}

func (c clusterIndex) addReplica(r *api.Replica) {
	if r != nil {
		indexAdd(c.replicas, r.Cluster, r.ID, r)
	}
}

func (c clusterIndex) removeReplica(r *api.Replica) {
	if r != nil {
		indexRemove(c.replicas, r.Cluster, r.ID)
	}
}

func (c clusterIndex) addMachine(m *api.Machine) {
	if m != nil {
		indexAdd(c.machines, m.Cluster, m.ID, m)
	}
}

func (c clusterIndex) removeMachine(m *api.Machine) {
	if m != nil {
		indexRemove(c.machines, m.Cluster, m.ID)
	}
}

// Cluster is a cluster's replicas (by service and id) and live machines
// (by id), as ListReplicas and ListMachines of the cluster would list
// them (shared: not to be changed), and the view's revision; false when
// the view is not loaded.
func (v *View) Cluster(name string) (replicas []*api.Replica, machines []*api.Machine, revision int64, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.loaded {
		return nil, nil, 0, false
	}
	replicas = slices.SortedFunc(maps.Values(v.byCluster.replicas[name]), byServiceAndID)
	machines = slices.SortedFunc(maps.Values(v.byCluster.machines[name]), func(a, b *api.Machine) int { return cmp.Compare(a.ID, b.ID) })
	return replicas, machines, v.rev, true
}

// ListReplicas answers the store's ListReplicas (and, with count,
// CountReplicas) from the view: the page of the replicas f selects, in
// the store's order (service, id), how many f selects in all (the page
// aside; without count, 0), and the view's revision; false when the view
// is not loaded. The list is read
// outside the view's lock (its sorted lists are never changed in place),
// so a scan of 500,000 replicas holds up no heartbeat.
func (v *View) ListReplicas(f store.ReplicaFilter, count bool) (page []*api.Replica, total int, revision int64, ok bool) {
	v.mu.Lock()
	if !v.loaded {
		v.mu.Unlock()
		return nil, 0, 0, false
	}
	all := v.snapshot().Replicas
	revision = v.rev
	v.mu.Unlock()
	from := all
	if len(f.After) == 2 {
		from = chunks.From(all, f.After, func(r *api.Replica, after []string) int {
			if cmp.Or(cmp.Compare(r.Service, after[0]), cmp.Compare(r.ID, after[1])) <= 0 {
				return -1
			}
			return 1 // the first strictly after the key
		})
	}
	page = pageOf(from, f)
	if count {
		total = countOf(all, f) // as CountReplicas counts: the filter's, whatever the page
	}
	return page, total, revision, true
}

// pageOf is the page of list that f selects: past f.Offset of them, at
// most f.Limit (0: all).
func pageOf(list chunks.List[api.Replica], f store.ReplicaFilter) (page []*api.Replica) {
	skip := f.Offset
	for r := range list.All {
		if f.Limit > 0 && len(page) == f.Limit {
			break
		}
		if !selects(f, r) {
			continue
		}
		if skip > 0 {
			skip--
			continue
		}
		page = append(page, r)
	}
	return page
}

func countOf(list chunks.List[api.Replica], f store.ReplicaFilter) (n int) {
	for r := range list.All {
		if selects(f, r) {
			n++
		}
	}
	return n
}

func selects(f store.ReplicaFilter, r *api.Replica) bool {
	return (f.Cluster == "" || r.Cluster == f.Cluster) && (f.Service == "" || r.Service == f.Service) &&
		(f.Machine == "" || r.Machine == f.Machine) && (f.PreviousMachine == "" || r.PreviousMachine == f.PreviousMachine)
}
