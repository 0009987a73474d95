package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/endpoints"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// refreshNames keeps the watched clusters' names current until ctx
// ends: it follows the change feed and computes again the names of the
// clusters a change touches, and every cluster's each Refresh.
func (s *Server) refreshNames(ctx context.Context) {
	ticker := s.clock.NewTicker(s.cfg.Names.Refresh)
	defer ticker.Stop()
	rev, err := s.revision(ctx)
	s.wakes.noted(rev, nil, nil)
	for {
		changed := s.store.Changed()
		if err != nil {
			// Where the feed was is unknown: start again from now, with
			// every cluster's names computed afresh.
			if rev, err = s.revision(ctx); err == nil {
				s.wakes.noted(rev, nil, nil)
				s.refreshNamesOf(ctx, nil)
			}
		} else {
			var touched map[string]bool
			var all bool
			if touched, all, rev, err = s.touchedClusters(ctx, rev); err == nil && (all || len(touched) > 0) {
				if all {
					touched = nil
				}
				s.refreshNamesOf(ctx, touched)
			}
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("follow the change feed for names", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-ticker.C():
			s.refreshNamesOf(ctx, nil)
		}
	}
}

// revision is the store's newest revision.
func (s *Server) revision(ctx context.Context) (int64, error) {
	var rev int64
	err := s.store.View(ctx, func(tx store.Tx) error {
		var err error
		rev, err = tx.Revision()
		return err
	})
	return rev, err
}

func (s *Server) refreshNamesOf(ctx context.Context, clusters map[string]bool) {
	if err := s.names.Refresh(ctx, clusters); err != nil && ctx.Err() == nil {
		s.log.Warn("compute names", "err", err)
	}
}

// touchedClusters reads the changes after rev: the clusters whose names
// they may change (all: every one's, for a change of a failover group or
// of the control loop's memory), and the revision read up to. It notes
// the machines whose assignments they may change (assignmentWakes).
func (s *Server) touchedClusters(ctx context.Context, rev int64) (touched map[string]bool, all bool, next int64, err error) {
	touched = map[string]bool{}
	for {
		machines := map[string]bool{}
		var gone []string
		var changes []store.Change
		err := s.store.View(ctx, func(tx store.Tx) error {
			var err error
			changes, err = tx.Changes(store.ChangeFilter{After: rev, Limit: s.cfg.Watch.Batch})
			return err
		})
		if err != nil {
			return nil, false, rev, err
		}
		for _, c := range changes {
			rev = c.Revision
			switch c.Kind {
			case store.FeedFailoverGroup, store.FeedMemory:
				all = true
			case store.FeedCluster:
				touched[c.Name] = true
			default:
				var o struct {
					Cluster string `json:"cluster"`
					Spec    struct {
						Cluster string `json:"cluster"`
					} `json:"spec"`
					Machine         string         `json:"machine"`
					PreviousMachine string         `json:"previousMachine"`
					FleetState      api.FleetState `json:"fleetState"`
				}
				if json.Unmarshal(c.Data, &o) == nil {
					touched[o.Cluster+o.Spec.Cluster] = true
				}
				switch c.Kind {
				case store.FeedMachine:
					s.credentials.forget(c.Name) // a join may have replaced its credential
					// A machine's own changes are mostly its heartbeats'
					// (waking it for them would double them); what it must
					// run changes with its replicas.
					if c.Deleted || o.FleetState == api.FleetTerminated {
						gone = append(gone, c.Name)
					}
				case store.FeedReplica:
					s.wakes.replicaAt(c.Name, o.Machine, o.PreviousMachine, c.Deleted, machines)
				}
			}
		}
		s.wakes.noted(rev, machines, gone)
		if len(changes) < s.cfg.Watch.Batch {
			return touched, all, rev, nil
		}
	}
}

// clusterNames computes a cluster's names from the store: one read of
// its services, and of the changes of its replicas and machines since
// the last computation (the server's view).
func (s *Server) clusterNames(ctx context.Context, cluster string) (api.ClusterNames, error) {
	var out api.ClusterNames
	err := s.store.View(ctx, func(tx store.Tx) error {
		services, err := tx.ListServices()
		if err != nil {
			return err
		}
		if _, err := s.view.Follow(tx); err != nil {
			return err
		}
		replicas, machines, _, _ := s.view.Cluster(cluster)
		byID := make(map[string]*api.Machine, len(machines))
		for _, m := range machines {
			byID[m.ID] = m
		}
		byService := map[string][]*api.Replica{}
		for _, r := range replicas {
			byService[r.Service] = append(byService[r.Service], r)
		}
		var sets []api.ServiceEndpoints
		var ingress []api.IngressRoute
		for _, svc := range services {
			if svc.Spec.Cluster == cluster {
				set := endpoints.Of(svc, byService[svc.Metadata.Name], byID)
				if err := weighCanary(tx, &set, svc); err != nil {
					return err
				}
				sets = append(sets, set)
				ingress = append(ingress, endpoints.Ingress(svc, set)...)
			}
		}
		groups, err := groupPrimaries(tx, cluster)
		if err != nil {
			return err
		}
		exposing, err := tx.ListFailoverGroups()
		if err != nil {
			return err
		}
		for _, g := range exposing {
			if primary, ok := groups[g.Metadata.Name]; ok {
				ingress = append(ingress, endpoints.GroupIngress(g, primary)...)
			}
		}
		var edge []string
		var mesh *api.MeshConfig
		if c, err := tx.GetCluster(cluster); err == nil {
			edge = endpoints.EdgeGroups(c)
			if c.OwnAddresses() {
				mesh = endpoints.Mesh(c.Spec.ContainerCIDR, machines)
				mesh.Mode = c.NetworkMode()
			}
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		out = endpoints.Names(cluster, sets, groups, ingress, edge)
		if mesh != nil {
			out.Mesh = mesh
			out.Version = endpoints.Version(out)
		}
		return nil
	})
	return out, err
}

// serviceEndpoints is a service's endpoints as the store holds them.
func serviceEndpoints(tx store.Tx, svc *api.Service) (api.ServiceEndpoints, error) {
	replicas, err := tx.ListReplicas(store.ReplicaFilter{Service: svc.Metadata.Name})
	if err != nil {
		return api.ServiceEndpoints{}, err
	}
	machines := map[string]*api.Machine{}
	for _, r := range replicas {
		for _, id := range []string{r.Machine, r.PreviousMachine} {
			if id == "" || machines[id] != nil {
				continue
			}
			m, err := tx.GetMachine(id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return api.ServiceEndpoints{}, err
			}
			machines[m.ID] = m
		}
	}
	set := endpoints.Of(svc, replicas, machines)
	c, err := tx.GetCluster(svc.Spec.Cluster)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return set, err
	}
	if c != nil && c.Kubernetes() {
		// The cluster's own DNS answers the Service Gantry made for it.
		settings, _ := spec.KubernetesConfig(c.Spec.Provider)
		set.Name = endpoints.KubernetesName(svc.Metadata.Name, settings.Namespace)
	}
	return set, weighCanary(tx, &set, svc)
}

// weighCanary gives a service's canaries their share of requests while
// its deployment waits for promotion (a read only for services with a
// canary weight).
func weighCanary(tx store.Tx, set *api.ServiceEndpoints, svc *api.Service) error {
	if svc.Spec.Update.CanaryWeight == 0 {
		return nil
	}
	deployments, err := deploymentsOf(tx, svc.Metadata.Name)
	if err != nil {
		return err
	}
	if dep, ok := deployments[svc.Metadata.Name]; ok {
		endpoints.WeighCanary(set, svc, &dep)
	}
	return nil
}

// groupPrimaries are the serving primaries of the failover groups with a
// side in cluster (nil while none serves: fencing, promoting, failed).
func groupPrimaries(tx store.Tx, cluster string) (map[string]*api.Endpoint, error) {
	groups, err := tx.ListFailoverGroups()
	if err != nil {
		return nil, err
	}
	out := map[string]*api.Endpoint{}
	for _, g := range groups {
		if g.Spec.Primary.Cluster != cluster && g.Spec.Replica.Cluster != cluster {
			continue
		}
		out[g.Metadata.Name] = nil
		info, err := failoverInfo(tx, g)
		if err != nil {
			return nil, err
		}
		if info.Endpoint == "" {
			continue
		}
		for _, m := range info.Members {
			if m.Cluster != info.Primary || m.Replica == "" {
				continue
			}
			r, err := tx.GetReplica(m.Replica)
			if err != nil {
				return nil, err
			}
			e := api.Endpoint{Replica: r.ID, Machine: r.Machine, Address: r.Address, Weight: endpoints.DefaultWeight, Serving: true, Reason: "serving primary"}
			for _, p := range g.Spec.Template.Ports {
				if port := r.HostPorts[p.Name]; port > 0 {
					if e.Ports == nil {
						e.Ports = map[string]int{}
					}
					e.Ports[p.Name] = port
				}
			}
			out[g.Metadata.Name] = &e
		}
	}
	return out, nil
}

// handleServiceEndpoints: GET /v1/services/{name}/endpoints, every
// replica of the service with whether it takes traffic and why.
func (s *Server) handleServiceEndpoints(w http.ResponseWriter, r *http.Request) {
	var out api.ServiceEndpoints
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		svc, err := tx.GetService(r.PathValue("name"))
		if err != nil {
			return err
		}
		out, err = serviceEndpoints(tx, svc)
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// handleMachineNames: GET /v1/machines/{id}/names?version=V, the names of
// the machine's cluster, held until their version differs from V.
func (s *Server) handleMachineNames(w http.ResponseWriter, r *http.Request) {
	var cluster string
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		m, err := tx.GetMachine(r.PathValue("id"))
		if err != nil {
			return err
		}
		if !m.Live() {
			return errorf(http.StatusGone, "gone", "", "machine %s is terminated", m.ID)
		}
		cluster = m.Cluster
		return nil
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	names, encoded, err := s.names.WaitEncoded(r.Context(), cluster, q.Get("version"), q.Get("delta") == "true")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(NamesVersionHeader, names.Version)
	_, _ = w.Write(encoded)
}

// NamesVersionHeader carries the version of the names a poll answers.
const NamesVersionHeader = "Gantry-Names-Version"
