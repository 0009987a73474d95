package decide

import (
	"slices"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// viewSkeleton is what buildView read of each machine of its view: where
// it is in the pass's machines, its id, cluster, list, whether it joined
// and when it was made. The booking keeps it, and the next pass takes it
// instead of reading every machine again (a cache miss each at 10,000
// machines) while its census holds (no machine changed, made or
// deleted), no cluster changed and the view is of the same clusters:
// then each machine would be read the same. Heartbeats do not count: the
// skeleton reads none. Never changed once made: passes share it.
type viewSkeleton struct {
	clusters []string
	entries  []skeletonEntry
	// ids and lists are the machines' ids and lists, as the view and the
	// booking take them.
	ids   []string
	lists []machineList
}

type skeletonEntry struct {
	// at is the machine's position in the pass's machines; cluster its
	// cluster's in the view's clusters.
	at, cluster int32
	joined      bool
	created     time.Time
}

// keptSkeleton is the last pass's skeleton when it holds for this pass's
// view of clusters (nil: the view reads its machines). The census says
// when no machine changed: it is the last pass's (keptCensus: the last
// pass changed and launched none, so neither did the skeleton list one
// of its launches) and still holds (fleet: this pass changed and
// launched none yet).
func (p *Pass) keptSkeleton(clusters []string) *viewSkeleton {
	prev, ch := p.snap.Booked, p.snap.Changed
	if prev == nil || prev.skeleton == nil || p.census != prev.census || p.fleet() == nil ||
		ch == nil || len(ch.Clusters) > 0 || !slices.Equal(prev.skeleton.clusters, clusters) {
		return nil
	}
	return prev.skeleton
}

// takeSkeleton reads the view's machines of clusters.
func (p *Pass) takeSkeleton(clusters []string) *viewSkeleton {
	n := len(p.machines)
	sk := &viewSkeleton{clusters: slices.Clone(clusters), entries: make([]skeletonEntry, 0, n),
		ids: make([]string, 0, n), lists: make([]machineList, 0, n)}
	type inView struct {
		cl *api.Cluster
		at int32 // in clusters (-1: not in the view)
	}
	clusterOf := runMemo(func(name string) inView { // machines come by id, mostly of one cluster or a few
		return inView{p.snap.Clusters[name], int32(slices.Index(clusters, name))}
	})
	for i, m := range p.machines {
		c := clusterOf(m.Cluster)
		if c.cl == nil || c.at < 0 || !m.CountsTowardGroup() || m.FleetState == api.FleetDraining || m.FleetState == api.FleetStopped {
			continue
		}
		joined, list := m.JoinState == api.JoinJoined, listNone
		switch {
		case joined && m.Schedulable() && inOverlay(m, c.cl):
			list = listJoined
		case m.Launching():
			list = listLaunching
		}
		sk.entries = append(sk.entries, skeletonEntry{at: int32(i), cluster: c.at, joined: joined, created: m.CreatedAt})
		sk.ids = append(sk.ids, m.ID)
		sk.lists = append(sk.lists, list)
	}
	return sk
}
