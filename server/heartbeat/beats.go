package heartbeat

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
	"k8s.io/utils/clock"
)

// FlushMetrics observe the batches' writes.
type FlushMetrics interface {
	FlushTook(seconds float64)
	HeartbeatsFlushed(machines int)
}

// Beats keeps the last heartbeat of each machine that reported to this
// server and has not been flushed to the store yet: a quiet heartbeat
// costs no write, and the batch goes out in one transaction every
// interval.
type Beats struct {
	store    store.Store
	interval time.Duration
	clock    clock.WithTicker
	metrics  FlushMetrics
	log      *slog.Logger

	mu      sync.Mutex
	pending map[string]time.Time
}

// NewBeats returns an empty batch, written to st every interval by Run.
func NewBeats(st store.Store, interval time.Duration, clk clock.WithTicker, metrics FlushMetrics, log *slog.Logger) *Beats {
	return &Beats{store: st, interval: interval, clock: clk, metrics: metrics, log: log, pending: map[string]time.Time{}}
}

// Beat notes machine's heartbeat at at.
func (b *Beats) Beat(machine string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if prev, ok := b.pending[machine]; !ok || at.After(prev) {
		b.pending[machine] = at
	}
}

// take empties the batch.
func (b *Beats) take() map[string]time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	batch := b.pending
	b.pending = map[string]time.Time{}
	return batch
}

// giveBack returns a batch that could not be written, for the next flush.
func (b *Beats) giveBack(batch map[string]time.Time) {
	for id, at := range batch {
		b.Beat(id, at)
	}
}

// Overlay sets the unflushed heartbeats on machines read from the
// store: the list's element becomes a copy carrying it. The machines
// themselves are left alone (a view shares them between readers).
func (b *Beats) Overlay(machines []*api.Machine) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		return
	}
	for i, m := range machines {
		if at, ok := b.pending[m.ID]; ok {
			machines[i] = m.WithHeartbeat(at.UTC())
		}
	}
}

// LayOn is Overlay for a pass: the unflushed heartbeats go into beats,
// aligned with machines (sorted by id, a view's): beats[i], in Unix
// nanoseconds, becomes the later of its own and machines[i]'s unflushed
// heartbeat; the machines are not copied. Each heartbeat is found among
// them by binary search, rather than each of 50,000 machines looked up
// among a second's heartbeats. It returns beats (made when nil and a
// heartbeat is to be laid).
func (b *Beats) LayOn(machines []*api.Machine, beats []int64) []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, at := range b.pending {
		i, ok := slices.BinarySearchFunc(machines, id, func(m *api.Machine, id string) int { return strings.Compare(m.ID, id) })
		if !ok {
			continue
		}
		if beats == nil {
			beats = make([]int64, len(machines))
		}
		beats[i] = max(beats[i], at.UnixNano())
	}
	return beats
}

// Run writes the batch every interval until ctx ends, then once more.
func (b *Beats) Run(ctx context.Context) {
	ticker := b.clock.NewTicker(b.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			b.Flush(context.Background())
			return
		case <-ticker.C():
			b.Flush(ctx)
		}
	}
}

// Flush writes the batch now; a batch that fails is kept for the next.
func (b *Beats) Flush(ctx context.Context) {
	batch := b.take()
	if len(batch) == 0 {
		return
	}
	start := time.Now() // a duration: wall time even under a fake clock
	defer func() { b.metrics.FlushTook(time.Since(start).Seconds()) }()
	if err := b.store.Update(ctx, func(tx store.Tx) error { return tx.PutLiveness(batch) }); err != nil {
		b.giveBack(batch)
		b.log.Warn("flush heartbeats", "machines", len(batch), "err", err)
		return
	}
	b.metrics.HeartbeatsFlushed(len(batch))
}
