// Package view is a server's in-memory copy of the store's declared and
// observed objects (clusters, services, failover groups, live machines,
// replicas and the control loop's memory), kept current from the change
// feed: an informer. Sync brings it to a read transaction's snapshot by
// reading only the changes since its revision (the whole store once, and
// again when the feed was compacted past it), so a reader that used to
// list the world each time reads a few rows.
//
// The objects it hands out are shared between readers and between
// syncs: a change replaces an object, never edits it, and readers must
// not change them (decide does not: its harness checks).
package view

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/internal/chunks"
	"github.com/gantry-dev/gantry/store"
)

// DefaultBatch is how many changes one read of the feed takes.
const DefaultBatch = 1000

// DefaultChangeLog is how many of the changes it applied a view keeps
// for ChangesSince.
const DefaultChangeLog = 1 << 16

// View is the copy. Its zero value is not ready: use New.
type View struct {
	batch int

	mu     sync.Mutex
	loaded bool
	rev    int64
	// Loads counts full reads of the store (the first, and one after
	// each compaction that passed the view).
	loads    int
	clusters map[string]*api.Cluster
	services map[string]*api.Service
	groups   map[string]*api.FailoverGroup
	machines map[string]*api.Machine // live ones
	replicas map[string]*api.Replica
	memory   map[string]string
	// work indexes the replicas by the machine they run on and the one
	// they leave (point reads: a heartbeat's); byCluster the replicas
	// and machines by cluster (a cluster's names).
	work      workIndex
	byCluster clusterIndex
	// sorted are the lists as the store would return them; dirty names
	// the objects changed since they were made, which the next snapshot
	// merges in.
	sorted sortedLists
	dirty  dirtyNames
	// strings are the strings the replicas and machines share.
	strings interner
	// beats are the recorded heartbeats; aligned those later than their
	// machines' own, as the last sync handed them out.
	beats   beatTable
	aligned alignedBeats
	counts  replicaCounts
	states  machineCounts
	// draining are the machines draining (what they hold is in work).
	draining map[string]bool
	// log are the changes applied since logFrom (at most logCap), for
	// the leader's pass (ChangesSince).
	log     []Logged
	logFrom int64
	logCap  int
}

// Logged is a change the view applied.
type Logged struct {
	Revision int64
	Kind     string // store.Feed*
	Name     string
	// Service and Machine are, for a replica, its service and the machine
	// it was on before the change ("": none, or new).
	Service string
	Machine string
}

// dirtyNames are the objects changed since the sorted lists were made,
// each with its version in them (nil: none).
type dirtyNames struct {
	clusters map[string]*api.Cluster
	services map[string]*api.Service
	groups   map[string]*api.FailoverGroup
	machines map[string]*api.Machine
	replicas map[string]*api.Replica
}

// mark notes that the named object changed; was is its version before
// (nil: none), kept from its first change since the lists were made.
func mark[T any](names *map[string]*T, name string, was *T) {
	if *names == nil {
		*names = map[string]*T{}
	}
	if _, seen := (*names)[name]; !seen {
		(*names)[name] = was
	}
}

type sortedLists struct {
	clusters []*api.Cluster
	services []*api.Service
	groups   []*api.FailoverGroup
	machines []*api.Machine
	replicas chunks.List[api.Replica]
	memory   map[string]string
}

// New returns an empty view that reads batch changes at a time and
// keeps the last changeLog it applied (0: DefaultBatch, DefaultChangeLog).
func New(batch, changeLog int) *View {
	if batch <= 0 {
		batch = DefaultBatch
	}
	if changeLog <= 0 {
		changeLog = DefaultChangeLog
	}
	return &View{batch: batch, logCap: changeLog}
}

// ChangesSince are the changes the view applied after revision from up
// to revision to, oldest first; false when it does not know them all
// (it read the whole store since, or has let them go).
func (v *View) ChangesSince(from, to int64) ([]Logged, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.loaded || from < v.logFrom || to > v.rev || from > to {
		return nil, false
	}
	after := func(rev int64) int {
		i, _ := slices.BinarySearchFunc(v.log, rev+1, func(l Logged, r int64) int { return cmp.Compare(l.Revision, r) })
		return i
	}
	return slices.Clone(v.log[after(from):after(to)]), true
}

// logged keeps a change, letting the oldest half go when the log is full.
func (v *View) logged(l Logged) {
	if len(v.log) >= v.logCap {
		drop := len(v.log) - v.logCap/2
		v.logFrom = v.log[drop-1].Revision
		v.log = slices.Clone(v.log[drop:])
	}
	v.log = append(v.log, l)
}

// Snapshot is the view at one revision: the store's lists, ordered as
// its List calls order them (clusters, services and groups by name,
// machines by id, replicas by service and id). Nothing in it may be
// changed.
type Snapshot struct {
	Revision       int64
	Clusters       []*api.Cluster
	Services       []*api.Service
	FailoverGroups []*api.FailoverGroup
	// Machines are the live machines. Heartbeats (from Sync only) are
	// their recorded heartbeats, aligned with them: Heartbeats[i], in
	// Unix nanoseconds, is Machines[i]'s when later than its own (0:
	// none; nil: none at all); WithHeartbeats lays them on copies.
	Machines   []*api.Machine
	Heartbeats []int64
	// Replicas are in chunks, so that a change among 500,000 makes a new
	// chunk, not a new list.
	Replicas chunks.List[api.Replica]
	Memory   map[string]string
	// InStoreOrder: every replica's id begins with its service's name and
	// a dash, so the replicas' order (by service and id) is the one a
	// pass searches them in.
	InStoreOrder bool
	// Retiring are the ids of the replicas retiring (out of their names,
	// running until drained), sorted.
	Retiring []string
	// Moving are the ids of the replicas moving off a machine, sorted.
	Moving []string
	// Pending counts the replicas on no machine, by cluster (none:
	// absent); Unplaced are their ids, sorted.
	Pending  map[string]int
	Unplaced []string
	// Orphaned are the services some replica names that are not among
	// Services, sorted.
	Orphaned []string
	// Draining are the ids of the replicas on each draining machine or
	// moving off it, sorted, for every machine draining.
	Draining map[string][]string
	// MachineStates count the live machines by cluster and state, sorted.
	MachineStates []MachineStates
}

// Sync brings the view to tx's snapshot and returns it. Heartbeats are
// not in the feed: each sync reads those recorded since the last into a
// table it keeps (beatTable), and the snapshot's Heartbeats are those
// later than their machines' own, aligned with the machines. Heartbeats
// is the caller's; the machines, like every object, are shared.
func (v *View) Sync(tx store.Tx) (Snapshot, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.update(tx); err != nil {
		v.loaded = false
		return Snapshot{}, err
	}
	changed, all, err := v.beats.read(tx)
	if err != nil {
		return Snapshot{}, err
	}
	snap := v.snapshot()
	snap.Heartbeats = v.aligned.of(snap.Machines, v.beats.at, changed, all)
	return snap, nil
}

// Loads is how many times the view read the whole store.
func (v *View) Loads() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.loads
}

func (v *View) update(tx store.Tx) error {
	if v.loaded {
		err := v.follow(tx)
		if !errors.Is(err, store.ErrCompacted) {
			return err
		}
	}
	return v.load(tx)
}

// load reads the whole store.
func (v *View) load(tx store.Tx) error {
	v.loaded = false
	rev, err := tx.Revision()
	if err != nil {
		return err
	}
	clusters, err := tx.ListClusters()
	if err != nil {
		return err
	}
	services, err := tx.ListServices()
	if err != nil {
		return err
	}
	groups, err := tx.ListFailoverGroups()
	if err != nil {
		return err
	}
	machines, err := tx.ListMachines(store.MachineFilter{LiveOnly: true})
	if err != nil {
		return err
	}
	replicas, err := tx.ListReplicas(store.ReplicaFilter{})
	if err != nil {
		return err
	}
	memory, err := tx.ListMemory()
	if err != nil {
		return err
	}
	v.clusters = byKey(clusters, clusterName)
	v.services = byKey(services, serviceName)
	v.groups = byKey(groups, groupName)
	v.machines = byKey(machines, machineID)
	v.replicas = byKey(replicas, replicaID)
	v.strings = interner{}
	for _, m := range machines { // not shared yet
		v.strings.machine(m)
	}
	for _, r := range replicas {
		v.strings.replica(r)
	}
	v.strings.base = len(v.strings.strs)
	v.counts = newReplicaCounts(replicas)
	v.work = newWorkIndex(replicas)
	v.byCluster = newClusterIndex(replicas, machines)
	v.states, v.draining = machineCounts{}, map[string]bool{}
	for _, m := range machines {
		v.states.add(m, 1)
		v.noteDraining(m.ID)
	}
	v.memory = maps.Clone(memory)
	if v.memory == nil {
		v.memory = map[string]string{}
	}
	v.sorted = sortedLists{clusters: clusters, services: services, groups: groups, machines: machines, replicas: chunks.Of(replicas), memory: maps.Clone(v.memory)}
	v.dirty = dirtyNames{}
	v.log, v.logFrom = nil, rev
	v.rev, v.loaded = rev, true
	v.loads++
	return nil
}

// follow applies the changes since the view's revision.
func (v *View) follow(tx store.Tx) error {
	for {
		changes, err := tx.Changes(store.ChangeFilter{After: v.rev, Limit: v.batch})
		if err != nil {
			return err
		}
		for _, c := range changes {
			if err := v.apply(c); err != nil {
				return err
			}
			v.rev = c.Revision
		}
		if len(changes) < v.batch {
			if v.strings.outgrown() {
				v.strings = compacted(v.machines, v.replicas)
			}
			return nil
		}
	}
}

func (v *View) apply(c store.Change) error {
	was := v.replicas[c.Name]
	defer func() { v.logged(logEntry(c, was, v.replicas)) }()
	var err error
	switch c.Kind {
	case store.FeedCluster:
		mark(&v.dirty.clusters, c.Name, v.clusters[c.Name])
		err = put(v.clusters, c, func(*api.Cluster) bool { return true })
	case store.FeedService:
		mark(&v.dirty.services, c.Name, v.services[c.Name])
		had := v.services[c.Name] != nil
		err = put(v.services, c, func(*api.Service) bool { return true })
		if had != (v.services[c.Name] != nil) {
			v.counts.servicesChanged()
		}
	case store.FeedFailoverGroup:
		mark(&v.dirty.groups, c.Name, v.groups[c.Name])
		err = put(v.groups, c, func(*api.FailoverGroup) bool { return true })
	case store.FeedMachine:
		mark(&v.dirty.machines, c.Name, v.machines[c.Name])
		v.byCluster.removeMachine(v.machines[c.Name])
		v.states.add(v.machines[c.Name], -1)
		err = put(v.machines, c, (*api.Machine).Live)
		v.states.add(v.machines[c.Name], 1)
		v.noteDraining(c.Name)
		v.strings.machine(v.machines[c.Name])
		v.byCluster.addMachine(v.machines[c.Name])
	case store.FeedReplica:
		mark(&v.dirty.replicas, c.Name, was)
		v.work.remove(v.replicas[c.Name])
		v.byCluster.removeReplica(v.replicas[c.Name])
		v.counts.add(v.replicas[c.Name], -1)
		err = put(v.replicas, c, func(*api.Replica) bool { return true })
		v.counts.add(v.replicas[c.Name], 1)
		v.strings.replica(v.replicas[c.Name])
		v.work.add(v.replicas[c.Name])
		v.byCluster.addReplica(v.replicas[c.Name])
	case store.FeedMemory:
		if c.Deleted {
			delete(v.memory, c.Name)
		} else {
			v.memory[c.Name] = string(c.Data)
		}
		v.sorted.memory = nil
	}
	if err != nil {
		return fmt.Errorf("view: change %d (%s %s): %w", c.Revision, c.Kind, c.Name, err)
	}
	return nil
}

// logEntry is how the log keeps a change: for a replica, its service
// and the machine it was on (was, before the change; replicas, after it,
// to find the service of one made).
func logEntry(c store.Change, was *api.Replica, replicas map[string]*api.Replica) Logged {
	l := Logged{Revision: c.Revision, Kind: c.Kind, Name: c.Name}
	switch {
	case c.Kind != store.FeedReplica:
	case was != nil:
		l.Service, l.Machine = was.Service, was.Machine
	case replicas[c.Name] != nil:
		l.Service = replicas[c.Name].Service
	}
	return l
}

// put replaces (or removes) the object a change names; keep says whether
// the object as written belongs in the view.
func put[T any](objects map[string]*T, c store.Change, keep func(*T) bool) error {
	delete(objects, c.Name)
	if c.Deleted {
		return nil
	}
	obj := new(T)
	if err := json.Unmarshal(c.Data, obj); err != nil {
		return err
	}
	if keep(obj) {
		objects[c.Name] = obj
	}
	return nil
}

// snapshot brings the lists up to the changes.
func (v *View) snapshot() Snapshot {
	s, d := &v.sorted, &v.dirty
	s.clusters = resorted(s.clusters, v.clusters, d.clusters, func(a, b *api.Cluster) int { return cmp.Compare(a.Metadata.Name, b.Metadata.Name) })
	s.services = resorted(s.services, v.services, d.services, func(a, b *api.Service) int { return cmp.Compare(a.Metadata.Name, b.Metadata.Name) })
	s.groups = resorted(s.groups, v.groups, d.groups, func(a, b *api.FailoverGroup) int { return cmp.Compare(a.Metadata.Name, b.Metadata.Name) })
	s.machines = resorted(s.machines, v.machines, d.machines, func(a, b *api.Machine) int { return cmp.Compare(a.ID, b.ID) })
	s.replicas = resortedChunks(s.replicas, v.replicas, d.replicas, byServiceAndID)
	*d = dirtyNames{}
	if s.memory == nil {
		s.memory = maps.Clone(v.memory)
	}
	return Snapshot{Revision: v.rev, Clusters: slices.Clip(s.clusters), Services: slices.Clip(s.services), FailoverGroups: slices.Clip(s.groups),
		Machines: slices.Clip(s.machines), Replicas: s.replicas, Memory: s.memory, InStoreOrder: v.counts.oddIDs == 0,
		Retiring: v.counts.retiringIDs(), Moving: v.counts.movingIDs(), Pending: v.counts.pendingByCluster(), Unplaced: v.counts.unplacedIDs(),
		Orphaned: v.counts.orphaned(v.services), MachineStates: v.states.list(), Draining: v.drainingHolds()}
}

// resorted is the sorted list of objects after the named ones changed:
// the old list without their old versions, found by binary search,
// merged with their present versions sorted. A few changes among
// 500,000 replicas cost copying the list, not a sort of it nor reading
// every object. The old list is left as it was (readers may hold it).
func resorted[T any](old []*T, objects map[string]*T, dirty map[string]*T, compare func(a, b *T) int) []*T {
	if len(dirty) == 0 && old != nil {
		return old
	}
	if old == nil || len(dirty) > len(old)/4 {
		return sortedBy(objects, compare)
	}
	drop := make([]int, 0, len(dirty))
	changed := make([]*T, 0, len(dirty))
	for name, was := range dirty {
		if was != nil {
			i, found := slices.BinarySearchFunc(old, was, compare)
			if !found || old[i] != was {
				return sortedBy(objects, compare) // not where its order says: sort afresh
			}
			drop = append(drop, i)
		}
		if o, ok := objects[name]; ok {
			changed = append(changed, o)
		}
	}
	slices.Sort(drop)
	slices.SortFunc(changed, compare)
	out := make([]*T, 0, len(old)-len(drop)+len(changed))
	merge := func(run []*T) {
		for len(changed) > 0 {
			k, _ := slices.BinarySearchFunc(run, changed[0], compare)
			if k == len(run) {
				break
			}
			out = append(append(out, run[:k]...), changed[0])
			run, changed = run[k:], changed[1:]
		}
		out = append(out, run...)
	}
	from := 0
	for _, i := range drop {
		merge(old[from:i])
		from = i + 1
	}
	merge(old[from:])
	return append(out, changed...)
}

// resortedChunks is resorted for a list in chunks: only the chunks the
// changes fall in are made anew.
func resortedChunks[T any](old chunks.List[T], objects map[string]*T, dirty map[string]*T, compare func(a, b *T) int) chunks.List[T] {
	if len(dirty) == 0 && old != nil {
		return old
	}
	if len(dirty) <= len(objects)/4 {
		if l, ok := chunks.Resorted(old, objects, dirty, compare); ok {
			return l
		}
	}
	return chunks.Of(sortedBy(objects, compare))
}

func byServiceAndID(a, b *api.Replica) int {
	return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.ID, b.ID))
}

func byKey[T any](list []*T, key func(*T) string) map[string]*T {
	out := make(map[string]*T, len(list))
	for _, o := range list {
		out[key(o)] = o
	}
	return out
}

func sortedBy[T any](objects map[string]*T, compare func(a, b *T) int) []*T {
	return slices.SortedFunc(maps.Values(objects), compare)
}

func clusterName(c *api.Cluster) string     { return c.Metadata.Name }
func serviceName(s *api.Service) string     { return s.Metadata.Name }
func groupName(g *api.FailoverGroup) string { return g.Metadata.Name }
func machineID(m *api.Machine) string       { return m.ID }
func replicaID(r *api.Replica) string       { return r.ID }
