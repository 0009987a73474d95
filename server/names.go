package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/endpoints"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// NamesConfig tunes how agents learn their cluster's names.
type NamesConfig struct {
	// Refresh is how often every watched cluster's names are computed
	// again whatever the change feed said: a safety net, since names
	// follow the feed (a cluster's names are computed again as soon as a
	// change of its replicas, machines, services or the control loop's
	// memory is committed).
	Refresh time.Duration
	// Wait is the longest an agent's poll for new names is held.
	Wait time.Duration
	// Forget is how long a cluster no agent asked about stays computed.
	Forget time.Duration
	// History is how many earlier versions of a cluster's names are kept
	// to answer agents holding one of them with the difference only.
	History int
}

// DefaultNamesConfig returns the defaults.
func DefaultNamesConfig() NamesConfig {
	return NamesConfig{Refresh: 10 * time.Second, Wait: 25 * time.Second, Forget: time.Minute, History: 16}
}

// namesHub keeps each watched cluster's names and wakes the agents'
// polls when they change: one computation per cluster per change,
// however many agents wait.
type namesHub struct {
	cfg     NamesConfig
	compute func(ctx context.Context, cluster string) (api.ClusterNames, error)
	now     func() time.Time

	mu       sync.Mutex
	clusters map[string]*watchedNames
	// first serialises the first computation of a cluster's names.
	first sync.Mutex
}

type watchedNames struct {
	current api.ClusterNames
	// encoded is current as JSON, encoded once for every poll it answers.
	encoded []byte
	// changed is closed (and replaced) when current changes.
	changed chan struct{}
	asked   time.Time
	// history are the versions before current, newest last.
	history []api.ClusterNames
	// deltas are the differences to current from versions of history,
	// encoded once each for every poll they answer (under diffing).
	diffing sync.Mutex
	deltas  map[string][]byte
}

func newNamesHub(cfg NamesConfig, now func() time.Time, compute func(context.Context, string) (api.ClusterNames, error)) *namesHub {
	return &namesHub{cfg: cfg, compute: compute, now: now, clusters: map[string]*watchedNames{}}
}

// wait returns the cluster's names once their version differs from
// version, or after Wait with the same ones.
func (h *namesHub) wait(ctx context.Context, cluster, version string) (api.ClusterNames, error) {
	names, _, err := h.waitEncoded(ctx, cluster, version, false)
	return names, err
}

// waitEncoded is wait with the names' JSON (shared: not to be changed);
// with delta, the JSON is the difference from version when that version
// is among the kept ones.
func (h *namesHub) waitEncoded(ctx context.Context, cluster, version string, delta bool) (api.ClusterNames, []byte, error) {
	w, err := h.watched(ctx, cluster)
	if err != nil {
		return api.ClusterNames{}, nil, err
	}
	timer := time.NewTimer(h.cfg.Wait)
	defer timer.Stop()
	for {
		h.mu.Lock()
		cur, encoded, changed := w.current, w.encoded, w.changed
		w.asked = h.now()
		h.mu.Unlock()
		if cur.Version != version {
			if delta {
				if d, ok := h.delta(w, cur, version); ok {
					return cur, d, nil
				}
			}
			return cur, encoded, nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return cur, encoded, nil
		case <-ctx.Done():
			return cur, encoded, nil
		}
	}
}

// delta is the encoded difference from version base to cur, when base
// is kept: computed by the first poll that asks, then shared.
func (h *namesHub) delta(w *watchedNames, cur api.ClusterNames, base string) ([]byte, bool) {
	if base == "" {
		return nil, false
	}
	w.diffing.Lock()
	defer w.diffing.Unlock()
	h.mu.Lock()
	if w.current.Version != cur.Version {
		h.mu.Unlock()
		return nil, false // moved on meanwhile: the caller answers cur whole
	}
	if d, ok := w.deltas[base]; ok {
		h.mu.Unlock()
		return d, true
	}
	var from *api.ClusterNames
	for i := range w.history {
		if w.history[i].Version == base {
			from = &w.history[i]
		}
	}
	h.mu.Unlock()
	if from == nil {
		return nil, false
	}
	d := encodeNames(endpoints.Diff(*from, cur))
	h.mu.Lock()
	if w.current.Version == cur.Version {
		w.deltas[base] = d
	}
	h.mu.Unlock()
	return d, true
}

// encodeNames is names as the poll answers them.
func encodeNames(names api.ClusterNames) []byte {
	body, _ := json.Marshal(names) // plain data: cannot fail
	return append(body, '\n')
}

// watched is a cluster's entry, computed at once the first time (once:
// the agents of a cluster that all ask when a server starts wait for one
// computation).
func (h *namesHub) watched(ctx context.Context, cluster string) (*watchedNames, error) {
	if w := h.entry(cluster); w != nil {
		return w, nil
	}
	h.first.Lock()
	defer h.first.Unlock()
	if w := h.entry(cluster); w != nil {
		return w, nil
	}
	names, err := h.compute(ctx, cluster)
	if err != nil {
		return nil, err
	}
	w := &watchedNames{current: names, encoded: encodeNames(names), changed: make(chan struct{}), asked: h.now(), deltas: map[string][]byte{}}
	h.mu.Lock()
	h.clusters[cluster] = w
	h.mu.Unlock()
	return w, nil
}

func (h *namesHub) entry(cluster string) *watchedNames {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.clusters[cluster]
}

// refresh computes the watched clusters' names again (those of only,
// when it is not nil), waking the polls of those that changed, and
// forgets the clusters no one asked about.
func (h *namesHub) refresh(ctx context.Context, only map[string]bool) error {
	h.mu.Lock()
	var clusters []string
	for name, w := range h.clusters {
		if h.now().Sub(w.asked) > h.cfg.Forget {
			delete(h.clusters, name)
			continue
		}
		if only == nil || only[name] {
			clusters = append(clusters, name)
		}
	}
	h.mu.Unlock()
	var errs []error
	for _, cluster := range clusters {
		names, err := h.compute(ctx, cluster)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		h.mu.Lock()
		w := h.clusters[cluster]
		stale := w != nil && w.current.Version != names.Version
		h.mu.Unlock()
		if !stale {
			continue
		}
		encoded := encodeNames(names) // outside the lock: polls go on meanwhile
		h.mu.Lock()
		if w := h.clusters[cluster]; w != nil && w.current.Version != names.Version {
			w.history = append(w.history, w.current)
			if len(w.history) > h.cfg.History {
				w.history = w.history[len(w.history)-h.cfg.History:]
			}
			w.current, w.encoded, w.deltas = names, encoded, map[string][]byte{}
			close(w.changed)
			w.changed = make(chan struct{})
		}
		h.mu.Unlock()
	}
	return errors.Join(errs...)
}

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
	if err := s.names.refresh(ctx, clusters); err != nil && ctx.Err() == nil {
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
	names, encoded, err := s.names.waitEncoded(r.Context(), cluster, q.Get("version"), q.Get("delta") == "true")
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
