package server

import (
	"context"
	"errors"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/store"
)

// ViewConfig tunes the server's view of the store.
type ViewConfig struct {
	// Resync is how often the view reads the feed even when no commit
	// was heard of (a notification lost).
	Resync time.Duration
}

// workReads are the reads a machine's assignments need: a store
// transaction's, or the server's view's.
type workReads interface {
	GetMemory(key string) (string, error)
	GetService(name string) (*api.Service, error)
}

// errNeedsStore: the view cannot answer (a Secret to open, a failover
// role to read); the store does.
var errNeedsStore = errors.New("needs a store read")

// followView keeps the server's view of the store current: it reads the
// changes after each commit this server hears of (its own, and the
// other servers' through the store's notifications), and every
// View.Resync in case a notification was lost.
func (s *Server) followView(ctx context.Context) {
	ticker := s.clock.NewTicker(s.cfg.View.Resync)
	defer ticker.Stop()
	for {
		changed := s.store.Changed()
		if err := s.syncView(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("follow the change feed for the server's view", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-ticker.C():
		}
	}
}

// syncView brings the view to the store's revision, unless it has
// followed every commit this server heard of since its last sync. One
// sync runs at a time; those waiting find the view current after it.
func (s *Server) syncView(ctx context.Context) error {
	s.viewSync.Lock()
	defer s.viewSync.Unlock()
	fired := s.store.Fired()
	if s.viewCurrent(fired) {
		return nil
	}
	err := s.store.View(ctx, func(tx store.Tx) error {
		_, err := s.view.Follow(tx)
		return err
	})
	if err == nil {
		s.viewFired.Store(fired + 1) // +1: 0 is "never synced"
	}
	return err
}

func (s *Server) viewCurrent(fired uint64) bool {
	return s.viewFired.Load() == fired+1 && s.view.Revision() > 0
}

// quietFromView answers a heartbeat from the server's view, with no
// store read, when it changes nothing but the time (as quietHeartbeat
// does from the store). The view is first brought up to every commit
// this server has heard of. ok is false when the view cannot answer:
// the machine is not in it (terminated, or the view not loaded), or an
// assignment needs a Secret or a failover role.
func (s *Server) quietFromView(ctx context.Context, id string, req api.HeartbeatRequest, now time.Time) (assignments []api.Assignment, quiet, ok bool) {
	if !s.viewCurrent(s.store.Fired()) {
		if err := s.syncView(ctx); err != nil {
			return nil, false, false
		}
	}
	w, found := s.view.Work(id)
	if !found {
		return nil, false, false
	}
	m := *w.Machine // the view's objects are shared: change copies
	if m.UnreachableSince != nil {
		return nil, false, true
	}
	work := make([]*api.Replica, 0, len(w.On)+len(w.Leaving))
	for _, r := range append(w.On, w.Leaving...) {
		c := *r
		work = append(work, &c)
	}
	if !stale(&m, req) {
		changed, err := replica.Apply(work[:len(w.On)], reportOf(&m, req), now)
		if err != nil || len(changed) > 0 {
			return nil, false, true
		}
		state := m.FleetState
		fleet.UpdateActivity(&m, len(work), now)
		if m.FleetState != state {
			return nil, false, true
		}
		if m.FleetState == api.FleetTerminating {
			return nil, true, true
		}
	}
	assignments, err := s.assignmentsOf(s.view, nil, &m, work)
	if err != nil {
		return nil, false, false
	}
	return assignments, true, true
}
