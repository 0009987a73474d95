package controller

import (
	"context"
	"maps"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/metrics"
	"github.com/gantry-dev/gantry/provider/registry"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/view"
)

// load reads the pass's snapshot: the store's objects and memory in one
// read transaction (from the controller's view, which reads only the
// changes since the last pass), the providers' catalogs for the
// clusters' settings, and what provider calls observed (taking the fresh
// inventories). It also returns the store revision the snapshot was read
// at.
func (c *Controller) load(ctx context.Context) (*decide.Snapshot, decide.Memory, int64, error) {
	return c.loadFor(ctx, true)
}

// loadFor is load; a dry run (take false) leaves the inventories for the
// next pass.
func (c *Controller) loadFor(ctx context.Context, take bool) (*decide.Snapshot, decide.Memory, int64, error) {
	snap := &decide.Snapshot{Clusters: map[string]*api.Cluster{}}
	var entries map[string]string
	var revision int64
	err := c.Store.View(ctx, func(tx store.Tx) error {
		objects, err := c.view.Sync(tx)
		if err != nil {
			return err
		}
		revision = objects.Revision
		for _, cl := range objects.Clusters {
			snap.Clusters[cl.Metadata.Name] = cl
		}
		snap.Services, snap.FailoverGroups = objects.Services, objects.FailoverGroups
		snap.Machines, snap.Heartbeats, snap.ReplicaChunks, entries = objects.Machines, objects.Heartbeats, objects.Replicas, objects.Memory
		snap.InStoreOrder, snap.Retiring, snap.Moving, snap.Unplaced = objects.InStoreOrder, objects.Retiring, objects.Moving, objects.Unplaced
		snap.Orphaned, snap.Draining, snap.MachinesByID = objects.Orphaned, objects.Draining, true // the view lists machines by id
		if take {
			c.pending, c.machineStates = objects.Pending, objects.MachineStates
		}
		if snap.SecretRevisions, err = secretRevisions(tx); err != nil {
			return err
		}
		if take {
			return c.feed.read(tx)
		}
		return nil
	})
	if err != nil {
		return nil, decide.Memory{}, 0, err
	}
	decode := decide.DecodeMemory
	if take { // the pass goroutine's: dry runs decode afresh
		decode = c.memory.Decode
	}
	mem, err := decode(entries)
	if err != nil {
		return nil, decide.Memory{}, 0, err
	}
	if c.Heartbeats != nil {
		snap.Heartbeats = c.Heartbeats(snap.Machines, snap.Heartbeats)
	}
	snap.Catalogs, snap.Providers = providerFacts(c.Registry, snap.Clusters)
	c.observed.KeepLaunching(snap.Machines)
	snap.Instances, snap.Inventories, snap.ListedAt = c.observed.View(take)
	snap.InFlight = c.calls.InFlight()
	snap.LivenessSince = c.LivenessSince()
	if c.Kubernetes != nil {
		snap.Kubernetes = c.Kubernetes()
	}
	return snap, mem, revision, nil
}

// providerFacts is what the registry says of the clusters' providers:
// each cluster's provider key and catalog (or why its settings cannot be
// used), and each provider's nature.
func providerFacts(reg *registry.Registry, clusters map[string]*api.Cluster) (map[string]decide.ClusterProvider, map[string]decide.ProviderInfo) {
	catalogs := map[string]decide.ClusterProvider{}
	for name, cl := range clusters {
		if cl.Kubernetes() {
			continue // a target, not a provider
		}
		key, prov, err := reg.For(cl.Spec.Provider)
		if err != nil {
			catalogs[name] = decide.ClusterProvider{Err: err.Error()}
			continue
		}
		catalogs[name] = decide.ClusterProvider{Key: key, Catalog: prov.InstanceTypes()}
	}
	return catalogs, providerInfos(reg)
}

// providerInfos is what decisions need to know of each provider.
func providerInfos(reg *registry.Registry) map[string]decide.ProviderInfo {
	infos := map[string]decide.ProviderInfo{}
	for _, name := range reg.Names() {
		e, _ := reg.Lookup(name)
		infos[name] = decide.ProviderInfo{Provisions: e.Provisions, CanStop: e.CanStop, Runtimes: reg.Runtimes(name)}
	}
	return infos
}

// fleetCounts are the gauges' values: machines by state and pending
// replicas by cluster, both counted by the view.
func fleetCounts(s *decide.Snapshot, states []view.MachineStates, pendingByCluster map[string]int) ([]metrics.MachineCount, map[string]int) {
	counts := make([]metrics.MachineCount, 0, len(states))
	for _, st := range states {
		counts = append(counts, metrics.MachineCount{Cluster: st.Cluster, JoinState: st.JoinState, FleetState: st.FleetState, N: st.N})
	}
	pending := map[string]int{}
	for name := range s.Clusters {
		pending[name] = 0
	}
	maps.Copy(pending, pendingByCluster)
	return counts, pending
}

// secretRevisions are every Secret's revision, by name.
func secretRevisions(tx store.Tx) (map[string]string, error) {
	secrets, err := tx.ListSecrets()
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(secrets))
	for _, sec := range secrets {
		if sec.Status != nil {
			out[sec.Metadata.Name] = sec.Status.Revision
		}
	}
	return out, nil
}

// changedSince is what changed in the store after revision from up to
// revision to, as the view applied it (nil: not known).
func (c *Controller) changedSince(from, to int64) *decide.Changes {
	logged, ok := c.view.ChangesSince(from, to)
	if !ok {
		return nil
	}
	changed := decide.NewChanges()
	for _, l := range logged {
		switch l.Kind {
		case store.FeedReplica:
			changed.Replica(l.Name, l.Service, l.Machine)
		case store.FeedService:
			changed.Services[l.Name] = true
		case store.FeedCluster:
			changed.Clusters[l.Name] = true
		case store.FeedMemory:
			changed.Memory[l.Name] = true
		case store.FeedMachine:
			changed.Machines[l.Name] = true
		}
	}
	return changed
}
