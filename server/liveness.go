package server

import (
	"context"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
)

// heartbeats keeps the last heartbeat of each machine that reported to
// this server and has not been flushed to the store yet: a quiet
// heartbeat costs no write, and the batch goes out in one transaction
// every HeartbeatFlushInterval.
type heartbeats struct {
	mu      sync.Mutex
	pending map[string]time.Time
}

func newHeartbeats() *heartbeats { return &heartbeats{pending: map[string]time.Time{}} }

func (h *heartbeats) beat(machine string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if prev, ok := h.pending[machine]; !ok || at.After(prev) {
		h.pending[machine] = at
	}
}

// take empties the batch.
func (h *heartbeats) take() map[string]time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	batch := h.pending
	h.pending = map[string]time.Time{}
	return batch
}

// giveBack returns a batch that could not be written, for the next flush.
func (h *heartbeats) giveBack(batch map[string]time.Time) {
	for id, at := range batch {
		h.beat(id, at)
	}
}

// overlay sets the unflushed heartbeats on machines read from the store.
func (h *heartbeats) overlay(machines []*api.Machine) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.pending) == 0 {
		return
	}
	for _, m := range machines {
		if at, ok := h.pending[m.ID]; ok && (m.LastHeartbeat == nil || at.After(*m.LastHeartbeat)) {
			t := at.UTC()
			m.LastHeartbeat = &t
		}
	}
}

// flushHeartbeats writes the batch every interval until ctx ends, then
// once more.
func (s *Server) flushHeartbeats(ctx context.Context) {
	ticker := s.clock.NewTicker(s.cfg.HeartbeatFlushInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			s.flushHeartbeatsOnce(context.Background())
			return
		case <-ticker.C():
			s.flushHeartbeatsOnce(ctx)
		}
	}
}

func (s *Server) flushHeartbeatsOnce(ctx context.Context) {
	batch := s.beats.take()
	if len(batch) == 0 {
		return
	}
	start := time.Now() // a duration: wall time even under a fake clock
	defer func() { s.metrics.FlushTook(time.Since(start).Seconds()) }()
	if err := s.store.Update(ctx, func(tx store.Tx) error { return tx.PutLiveness(batch) }); err != nil {
		s.beats.giveBack(batch)
		s.log.Warn("flush heartbeats", "machines", len(batch), "err", err)
		return
	}
	s.metrics.HeartbeatsFlushed(len(batch))
}
