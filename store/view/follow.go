package view

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantry-dev/gantry/store"
	"k8s.io/utils/clock"
)

// Source is the store a view follows: its reads and its wake-ups.
type Source interface {
	View(ctx context.Context, fn func(store.Tx) error) error
	store.Notifier
}

// Follower keeps a view current: it reads the changes after each commit
// its server hears of (its own, and the other servers' through the
// store's notifications), and every Resync in case a notification was
// lost.
type Follower struct {
	view   *View
	source Source
	resync time.Duration
	clock  clock.WithTicker
	log    *slog.Logger

	// fired is the source's Fired()+1 the last sync began at (0: never
	// synced); syncing lets one sync run at a time.
	fired   atomic.Uint64
	syncing sync.Mutex
}

// NewFollower returns a follower of source into v.
func NewFollower(v *View, source Source, resync time.Duration, clk clock.WithTicker, log *slog.Logger) *Follower {
	return &Follower{view: v, source: source, resync: resync, clock: clk, log: log}
}

// View is the view followed.
func (f *Follower) View() *View { return f.view }

// Run follows until ctx ends.
func (f *Follower) Run(ctx context.Context) {
	ticker := f.clock.NewTicker(f.resync)
	defer ticker.Stop()
	for {
		changed := f.source.Changed()
		if err := f.Sync(ctx); err != nil && ctx.Err() == nil {
			f.log.Warn("follow the change feed for the server's view", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-ticker.C():
		}
	}
}

// Sync brings the view to the store's revision, unless it has followed
// every commit this server heard of since its last sync. One sync runs
// at a time; those waiting find the view current after it.
func (f *Follower) Sync(ctx context.Context) error {
	f.syncing.Lock()
	defer f.syncing.Unlock()
	fired := f.source.Fired()
	if f.current(fired) {
		return nil
	}
	err := f.source.View(ctx, func(tx store.Tx) error {
		_, err := f.view.Follow(tx)
		return err
	})
	if err == nil {
		f.fired.Store(fired + 1)
	}
	return err
}

// Current brings the view up to every commit this server has heard of,
// and reports whether it is.
func (f *Follower) Current(ctx context.Context) bool {
	if f.current(f.source.Fired()) {
		return true
	}
	return f.Sync(ctx) == nil
}

func (f *Follower) current(fired uint64) bool {
	return f.fired.Load() == fired+1 && f.view.Revision() > 0
}
