package controller

import (
	"context"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/metrics"
	"github.com/gantry-dev/gantry/provider/registry"
	"github.com/gantry-dev/gantry/store"
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
		snap.Machines, snap.Replicas, entries = objects.Machines, objects.Replicas, objects.Memory
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
	mem, err := decide.DecodeMemory(entries)
	if err != nil {
		return nil, decide.Memory{}, 0, err
	}
	if c.Heartbeats != nil {
		c.Heartbeats(snap.Machines)
	}
	snap.Catalogs, snap.Providers = providerFacts(c.Registry, snap.Clusters)
	c.observed.keepLaunching(snap.Machines)
	snap.Instances, snap.Inventories, snap.ListedAt = c.observed.view(take)
	snap.InFlight = c.calls.inFlight()
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

// observations are what Describe and List calls found, kept until a pass
// takes them (inventories once; instances until the machine is gone).
type observations struct {
	mu          sync.Mutex
	instances   map[string]decide.InstanceObservation
	inventories map[string]decide.Inventory
	listedAt    map[string]time.Time
}

func newObservations() *observations {
	return &observations{instances: map[string]decide.InstanceObservation{}, inventories: map[string]decide.Inventory{}, listedAt: map[string]time.Time{}}
}

// reset forgets everything: a new term lists and describes afresh.
func (o *observations) reset() {
	fresh := newObservations()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.instances, o.inventories, o.listedAt = fresh.instances, fresh.inventories, fresh.listedAt
}

func (o *observations) described(machine string, obs decide.InstanceObservation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.instances[machine] = obs
}

func (o *observations) listed(key string, inv decide.Inventory) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.inventories[key] = inv
	o.listedAt[key] = inv.At
}

// relist forgets that keys were listed: a pass that took their
// inventories failed before acting on them.
func (o *observations) relist(keys map[string]decide.Inventory) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k := range keys {
		delete(o.listedAt, k)
	}
}

// keepLaunching drops what was observed of machines that joined or are
// gone: only launches are followed by Describe.
func (o *observations) keepLaunching(machines []*api.Machine) {
	launching := map[string]bool{}
	for _, m := range machines {
		if m.Launching() {
			launching[m.ID] = true
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for id := range o.instances {
		if !launching[id] {
			delete(o.instances, id)
		}
	}
}

// view copies the observations for a pass; with take, inventories are
// handed over (each is judged by one pass only).
func (o *observations) view(take bool) (map[string]decide.InstanceObservation, map[string]decide.Inventory, map[string]time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	instances := make(map[string]decide.InstanceObservation, len(o.instances))
	for k, v := range o.instances {
		instances[k] = v
	}
	listedAt := make(map[string]time.Time, len(o.listedAt))
	for k, v := range o.listedAt {
		listedAt[k] = v
	}
	if !take {
		return instances, map[string]decide.Inventory{}, listedAt
	}
	inventories := o.inventories
	o.inventories = map[string]decide.Inventory{}
	return instances, inventories, listedAt
}

// fleetCounts are the gauges' values: machines by state, pending replicas.
func fleetCounts(s *decide.Snapshot) ([]metrics.MachineCount, map[string]int) {
	byKey := map[[3]string]int{}
	for _, m := range s.Machines {
		byKey[[3]string{m.Cluster, string(m.JoinState), string(m.FleetState)}]++
	}
	counts := make([]metrics.MachineCount, 0, len(byKey))
	for k, n := range byKey {
		counts = append(counts, metrics.MachineCount{Cluster: k[0], JoinState: k[1], FleetState: k[2], N: n})
	}
	pending := map[string]int{}
	for name := range s.Clusters {
		pending[name] = 0
	}
	for _, r := range s.Replicas {
		if r.Machine == "" {
			pending[r.Cluster]++
		}
	}
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
