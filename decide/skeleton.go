package decide

import (
	"cmp"
	"math"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
)

// viewSkeleton is what buildView read of each machine of its view: where
// it is in the pass's machines, its id, cluster, list, whether it joined
// and when it was made. The booking keeps it, and the next pass takes it
// instead of reading every machine again (a cache miss each at 10,000
// machines) while its census holds (no machine changed, made or
// deleted), no cluster changed and the view is of the same clusters:
// then each machine would be read the same. When machines changed in
// place, the next pass reads those again (updatedSkeleton). Heartbeats do
// not count: the skeleton reads none. Never changed once made: passes
// share it.
type viewSkeleton struct {
	clusters []string
	entries  []skeletonEntry
	// ids and lists are the machines' ids and lists, as the view and the
	// booking take them.
	ids   []string
	lists []machineList
	// sums are machineSums', summed once: a skeleton kept pass after
	// pass was summed again by each.
	sumsOnce sync.Once
	sums     *planner.MachineSums
}

// skeletonEntry holds no pointer: a skeleton spliced in a pass is
// copied without the collector's write barriers and never scanned (a
// time.Time holds its location's).
type skeletonEntry struct {
	// at is the machine's position in the pass's machines; cluster its
	// cluster's in the view's clusters.
	at, cluster int32
	joined      bool
	created     instant
	// price is the machine's, for the planner's sums (machineSums).
	price float64
}

// instant is a time as nanoseconds since 1970 (noInstant: the zero time).
// It holds the years 1678 to 2262, UnixNano's range: the times it keeps
// are machines' creation times, set by the server's clock.
type instant int64

const noInstant instant = math.MinInt64

func instantOf(t time.Time) instant {
	if t.IsZero() {
		return noInstant
	}
	return instant(t.UnixNano())
}

// time is the instant in UTC, as the store keeps times.
func (n instant) time() time.Time {
	if n == noInstant {
		return time.Time{}
	}
	return time.Unix(0, int64(n)).UTC()
}

// skeletonRead is what a skeleton read of the machines, without what it
// summed of them since.
type skeletonRead struct {
	Clusters []string
	Entries  []skeletonEntry
	IDs      []string
	Lists    []machineList
}

func (sk *viewSkeleton) read() *skeletonRead {
	if sk == nil {
		return nil
	}
	return &skeletonRead{sk.clusters, sk.entries, sk.ids, sk.lists}
}

// readAs: both skeletons read the machines alike (or neither is).
func (sk *viewSkeleton) readAs(o *viewSkeleton) bool { return reflect.DeepEqual(sk.read(), o.read()) }

// keptSkeleton is the last pass's skeleton when it holds for this pass's
// view of clusters (nil: the view reads its machines). The census says
// when no machine changed: it is the last pass's (keptCensus: the last
// pass changed and launched none, so neither did the skeleton list one
// of its launches) and still holds (fleet: this pass changed and
// launched none yet).
func (p *Pass) keptSkeleton(clusters []string) *viewSkeleton {
	if sk := p.lastSkeleton(clusters); sk != nil && p.census == p.snap.Booked.census {
		return sk
	}
	return nil
}

// takeSkeleton reads the view's machines of clusters.
func (p *Pass) takeSkeleton(clusters []string) *viewSkeleton {
	n, spare := len(p.machines), p.spares()
	sk := &viewSkeleton{clusters: slices.Clone(clusters), entries: takeSpare(&spare.entries, n),
		ids: takeSpare(&spare.ids, n), lists: takeSpare(&spare.lists, n)}
	clusterOf := runMemo(p.clusterInView(clusters)) // machines come by id, mostly of one cluster or a few
	for i, m := range p.machines {
		if e, list, in := readEntry(i, m, clusterOf(m.Cluster)); in {
			sk.entries = append(sk.entries, e)
			sk.ids = append(sk.ids, m.ID)
			sk.lists = append(sk.lists, list)
		}
	}
	return sk
}

// updatedSkeleton is the last pass's skeleton with the machines changed
// since read again (nil: the view reads every machine). It holds when the
// pass's machines are the last pass's, at the same places (changedPlaces),
// and no changed machine came into the view or left it; the list of ids
// is the last skeleton's, which tells the booking's merge that each
// machine is where it was (sameMachines). At 10,000 machines, a machine
// changed in one pass in two (a describe's answer, a join), and reading
// every machine again, then merging the booking by comparing ids, cost
// a tenth of a steady hour.
func (p *Pass) updatedSkeleton(clusters []string) *viewSkeleton {
	old := p.lastSkeleton(clusters)
	if old == nil {
		return nil
	}
	places, ok := changedPlaces(p.snap, p.machines, p.sortedMachines)
	if !ok {
		return nil
	}
	sk := old
	clusterOf := p.clusterInView(clusters)
	for _, i := range places {
		k, was := slices.BinarySearchFunc(old.entries, int32(i), func(e skeletonEntry, at int32) int { return cmp.Compare(e.at, at) })
		m := p.machines[i]
		e, list, in := readEntry(i, m, clusterOf(m.Cluster))
		switch {
		case in != was:
			return nil
		case !in || e == sk.entries[k] && list == sk.lists[k]:
			continue
		case sk == old: // shared by passes: changed on a copy
			spare := p.spares()
			sk = &viewSkeleton{clusters: old.clusters, entries: spareCopy(&spare.entries, old.entries), ids: old.ids, lists: spareCopy(&spare.lists, old.lists)}
		}
		sk.entries[k], sk.lists[k] = e, list
	}
	return sk
}

// splicedSkeleton is the last pass's skeleton with the machines made and
// deleted since spliced in and out, and those changed read again (nil:
// the view reads every machine), when the change feed names every
// machine made, changed or deleted (sinceLast): the others keep their
// entries, at their places now. The machines the pass changed itself are
// read again too, and those it launched are added at the end. At 10,000
// machines a machine launched or terminated in one steady pass in
// several, and reading every machine again then (a cache miss each) was
// a twentieth of the steady hours. It notes the place each entry had in
// the last skeleton (splicedFrom), for the view to follow.
func (p *Pass) splicedSkeleton(clusters []string) *viewSkeleton {
	old := p.lastSkeletonOf(clusters)
	if old == nil {
		return nil
	}
	sp, ok := p.sinceLast()
	if !ok {
		return nil
	}
	ids := p.snap.Booked.census.ids
	changed, ok := p.changedSinceCensus(sp.changed, ids)
	if !ok {
		return nil
	}
	n, spare := len(old.entries)+len(sp.made), p.spares()
	sk := &viewSkeleton{clusters: old.clusters, entries: takeSpare(&spare.entries, n), ids: takeSpare(&spare.ids, n), lists: takeSpare(&spare.lists, n)}
	from := make([]int32, 0, n)
	clusterOf := p.clusterInView(clusters)
	read := func(i int, was int32) {
		m := p.machines[i]
		if e, list, in := readEntry(i, m, clusterOf(m.Cluster)); in {
			sk.entries, sk.ids, sk.lists = append(sk.entries, e), append(sk.ids, m.ID), append(sk.lists, list)
			from = append(from, was)
		}
	}
	made, gone := sp.made, sp.gone
	j, k := 0, 0     // the census's place of the next machine kept, and its entry's
	skip := func() { // the entry of the machine at j, if it had one, is not kept
		if k < len(old.entries) && int(old.entries[k].at) == j {
			k++
		}
	}
	for i := 0; i < p.sortedMachines; {
		if len(made) > 0 && made[0] == i {
			made = made[1:]
			read(i, -1)
			i++
			continue
		}
		for len(gone) > 0 && gone[0] == j {
			skip()
			gone, j = gone[1:], j+1
		}
		switch {
		case j == len(ids):
			return nil
		case len(changed) > 0 && changed[0] == j:
			if ids[j] != p.machines[i].ID {
				return nil // not where the feed says: read every machine
			}
			changed = changed[1:]
			was := int32(-1)
			if k < len(old.entries) && int(old.entries[k].at) == j {
				was = int32(k)
			}
			skip()
			read(i, was)
			i, j = i+1, j+1
			continue
		}
		// Up to the next machine made, gone or changed, the machines are
		// the census's, one for one: their entries are copied whole.
		n := min(p.sortedMachines-i, len(ids)-j, stepsTo(made, i), stepsTo(gone, j), stepsTo(changed, j))
		end := k
		for end < len(old.entries) && int(old.entries[end].at) < j+n {
			end++
		}
		start := len(sk.entries)
		sk.entries, sk.ids, sk.lists = append(sk.entries, old.entries[k:end]...), append(sk.ids, old.ids[k:end]...), append(sk.lists, old.lists[k:end]...)
		if shift := int32(i - j); shift != 0 {
			for e := start; e < len(sk.entries); e++ {
				sk.entries[e].at += shift
			}
		}
		for ; k < end; k++ {
			from = append(from, int32(k))
		}
		i, j = i+n, j+n
	}
	for i := p.sortedMachines; i < len(p.machines); i++ { // the pass's launches
		read(i, -1)
	}
	p.splicedFrom = from
	return sk
}

// changedSinceCensus are the census's places (of ids) of the machines
// changed in place since it was taken (changed) and of those the pass
// changed itself, sorted, each once; false when one the pass changed is
// not counted.
func (p *Pass) changedSinceCensus(changed []int, ids []string) ([]int, bool) {
	var own []int
	for m := range p.mineMachines {
		if isPlaceholder(m) {
			continue // a launch: at the end
		}
		j, ok := slices.BinarySearch(ids, m.ID)
		if !ok {
			return nil, false
		}
		own = append(own, j)
	}
	if len(own) == 0 {
		return changed, true
	}
	own = append(own, changed...)
	slices.Sort(own)
	return slices.Compact(own), true
}

// lastSkeleton is the last pass's skeleton when this pass may update it
// for what changed since (nil: it may not): the feed is known, no
// cluster changed, the view is of the same clusters, and the pass changed
// and launched no machine yet.
func (p *Pass) lastSkeleton(clusters []string) *viewSkeleton {
	if p.fleet() == nil {
		return nil
	}
	return p.lastSkeletonOf(clusters)
}

// lastSkeletonOf is lastSkeleton for a pass that reads again the
// machines it changed, and those it launched (splicedSkeleton).
func (p *Pass) lastSkeletonOf(clusters []string) *viewSkeleton {
	prev, ch := p.snap.Booked, p.snap.Changed
	if prev == nil || prev.skeleton == nil || ch == nil || len(ch.Clusters) > 0 || !slices.Equal(prev.skeleton.clusters, clusters) {
		return nil
	}
	return prev.skeleton
}

// sameMachines: two skeletons list the same machines in the same order
// (one is the other, or updated from it).
func sameMachines(a, b *viewSkeleton) bool {
	return a != nil && b != nil && (a == b || len(a.ids) == len(b.ids) && (len(a.ids) == 0 || &a.ids[0] == &b.ids[0]))
}

// inView is a machine's cluster and its place among the view's clusters
// (-1: not in the view).
type inView struct {
	cl *api.Cluster
	at int32
}

func (p *Pass) clusterInView(clusters []string) func(string) inView {
	return func(name string) inView { return inView{p.snap.Clusters[name], int32(slices.Index(clusters, name))} }
}

// readEntry is what the view reads of machine i, m (in: m is in the view).
func readEntry(i int, m *api.Machine, c inView) (skeletonEntry, machineList, bool) {
	if c.cl == nil || c.at < 0 || !m.CountsTowardGroup() || m.FleetState == api.FleetDraining || m.FleetState == api.FleetStopped {
		return skeletonEntry{}, listNone, false
	}
	joined, list := m.JoinState == api.JoinJoined, listNone
	switch {
	case joined && m.Schedulable() && inOverlay(m, c.cl):
		list = listJoined
	case m.Launching():
		list = listLaunching
	}
	return skeletonEntry{at: int32(i), cluster: c.at, joined: joined, created: instantOf(m.CreatedAt), price: m.PricePerHour}, list, true
}

// machineSums is what the planner would sum of the view's machines (its
// entries, by id, are the skeleton's): their prices, in that order, and
// the clusters with one not joined. Read side by side from the entries,
// not from each machine's booked entry, a cache miss each at 10,000
// machines in every plan that leaves consolidation out.
// The planner reads them and never changes them: they are shared by the
// passes that share the skeleton.
func (sk *viewSkeleton) machineSums() *planner.MachineSums {
	sk.sumsOnce.Do(func() { sk.sums = sk.sumUp() })
	return sk.sums
}

func (sk *viewSkeleton) sumUp() *planner.MachineSums {
	sums := &planner.MachineSums{}
	for _, e := range sk.entries {
		sums.PricePerHour += e.price
		if !e.joined {
			if sums.Unjoined == nil {
				sums.Unjoined = map[string]bool{}
			}
			sums.Unjoined[sk.clusters[e.cluster]] = true
		}
	}
	return sums
}
