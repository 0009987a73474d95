package controller

import (
	"context"
	"fmt"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/provider/registry"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/store"
)

// DryRun decides one pass on the live snapshot with clusters and services
// replacing the stored ones of the same name, and acts on nothing: the
// plan is the record of what a pass would do (`gantry plan`).
func (c *Controller) DryRun(ctx context.Context, clusters []*api.Cluster, services []*api.Service) (decide.Plan, error) {
	snap, mem, _, err := c.loadFor(ctx, false)
	if err != nil {
		return decide.Plan{}, err
	}
	merge(snap, clusters, services)
	snap.Catalogs, snap.Providers = providerFacts(c.Registry, snap.Clusters)
	return decide.Decide(c.cfg.Decide, snap, mem, c.Clock.Now()), nil
}

// merge puts clusters and services into a snapshot, each replacing the
// one of the same name.
func merge(snap *decide.Snapshot, clusters []*api.Cluster, services []*api.Service) {
	for _, cl := range clusters {
		snap.Clusters[cl.Metadata.Name] = cl
	}
	for _, svc := range services {
		replaced := false
		for i, old := range snap.Services {
			if old.Metadata.Name == svc.Metadata.Name {
				snap.Services[i], replaced = svc, true
			}
		}
		if !replaced {
			snap.Services = append(snap.Services, svc)
		}
	}
}

// OfflineSnapshot is a snapshot of empty clusters for an offline plan:
// the resources alone, priced with catalog when given (else each
// provider's built-in catalog).
func OfflineSnapshot(reg *registry.Registry, catalog []provisioner.InstanceType, clusters []*api.Cluster, services []*api.Service) *decide.Snapshot {
	snap := &decide.Snapshot{Clusters: map[string]*api.Cluster{}, Catalogs: map[string]decide.ClusterProvider{}}
	merge(snap, clusters, services)
	for name, cl := range snap.Clusters {
		types, ok := catalog, catalog != nil
		if !ok {
			types, ok = reg.Catalog(cl.Spec.Provider)
		}
		if !ok {
			snap.Catalogs[name] = decide.ClusterProvider{Err: "no catalog for provider " + cl.Spec.Provider.Name}
			continue
		}
		snap.Catalogs[name] = decide.ClusterProvider{Key: cl.Spec.Provider.Name, Catalog: types}
	}
	snap.Providers = providerInfos(reg)
	return snap
}

// FromScratch plans the stored services onto empty clusters, as if no
// machine ran: the cost view compares the fleet with it and with its
// lower bound.
func (c *Controller) FromScratch(ctx context.Context) (decide.Plan, error) {
	snap, mem, _, err := c.loadFor(ctx, false)
	if err != nil {
		return decide.Plan{}, err
	}
	scratch := &decide.Snapshot{Clusters: snap.Clusters, Services: snap.Services, FailoverGroups: snap.FailoverGroups,
		Catalogs: snap.Catalogs, Providers: snap.Providers, SecretRevisions: snap.SecretRevisions}
	return decide.Decide(c.cfg.Decide, scratch, mem, c.Clock.Now()), nil
}

// Declared is the stored spec with what the control loop prices it with:
// the clusters, services and failover groups, each cluster's catalog and
// the providers (no machine, replica or memory). A simulation of the
// stored spec starts from it.
func (c *Controller) Declared(ctx context.Context) (*decide.Snapshot, error) {
	snap := &decide.Snapshot{Clusters: map[string]*api.Cluster{}}
	err := c.Store.View(ctx, func(tx store.Tx) error {
		clusters, err := tx.ListClusters()
		if err != nil {
			return err
		}
		for _, cl := range clusters {
			snap.Clusters[cl.Metadata.Name] = cl
		}
		if snap.Services, err = tx.ListServices(); err != nil {
			return err
		}
		snap.FailoverGroups, err = tx.ListFailoverGroups()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the spec: %w", err)
	}
	snap.Catalogs, snap.Providers = providerFacts(c.Registry, snap.Clusters)
	return snap, nil
}

// DecideConfig is the control loop's decision settings.
func (c *Controller) DecideConfig() decide.Config { return c.cfg.Decide }
