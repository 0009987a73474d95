// Package names keeps the names each cluster's agents resolve (services'
// endpoints, failover groups' primaries, ingress routes, the mesh) and
// answers the agents' long polls for them: one computation per cluster
// per change, however many agents wait, and the difference from the
// version an agent holds when that version is still kept.
package names

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/endpoints"
)

// Config tunes how agents learn their cluster's names.
type Config struct {
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

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Refresh: 10 * time.Second, Wait: 25 * time.Second, Forget: time.Minute, History: 16}
}

// Hub keeps each watched cluster's names and wakes the agents'
// polls when they change: one computation per cluster per change,
// however many agents wait.
type Hub struct {
	cfg     Config
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

// NewHub returns a hub that computes a cluster's names with compute.
func NewHub(cfg Config, now func() time.Time, compute func(context.Context, string) (api.ClusterNames, error)) *Hub {
	return &Hub{cfg: cfg, compute: compute, now: now, clusters: map[string]*watchedNames{}}
}

// Wait returns the cluster's names once their version differs from
// version, or after Wait with the same ones.
func (h *Hub) Wait(ctx context.Context, cluster, version string) (api.ClusterNames, error) {
	names, _, err := h.WaitEncoded(ctx, cluster, version, false)
	return names, err
}

// WaitEncoded is Wait with the names' JSON (shared: not to be changed);
// with delta, the JSON is the difference from version when that version
// is among the kept ones.
func (h *Hub) WaitEncoded(ctx context.Context, cluster, version string, delta bool) (api.ClusterNames, []byte, error) {
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
func (h *Hub) delta(w *watchedNames, cur api.ClusterNames, base string) ([]byte, bool) {
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
func (h *Hub) watched(ctx context.Context, cluster string) (*watchedNames, error) {
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

func (h *Hub) entry(cluster string) *watchedNames {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.clusters[cluster]
}

// Refresh computes the watched clusters' names again (those of only,
// when it is not nil), waking the polls of those that changed, and
// forgets the clusters no one asked about.
func (h *Hub) Refresh(ctx context.Context, only map[string]bool) error {
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
