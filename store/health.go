package store

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Health is whether the store accepts writes.
type Health struct {
	Healthy bool
	// Error is the last failure while unhealthy.
	Error string
	// Since is when the store became healthy or unhealthy.
	Since time.Time
	// Failures counts failed writes since the monitor started.
	Failures int64
}

// Monitor is a Store that keeps track of whether writes succeed: a full
// disk or a read-only file system shows in Health instead of only in the
// callers' errors.
type Monitor struct {
	Store
	clock clock.PassiveClock

	mu     sync.Mutex
	health Health
}

// NewMonitor watches s; the store counts as healthy from now on.
func NewMonitor(s Store, clk clock.PassiveClock) *Monitor {
	return &Monitor{Store: s, clock: clk, health: Health{Healthy: true, Since: clk.Now()}}
}

// Update implements Store.
func (m *Monitor) Update(ctx context.Context, fn func(Tx) error) error {
	err := m.Store.Update(ctx, fn)
	m.observe(err)
	return err
}

func (m *Monitor) observe(err error) {
	failed := errors.Is(err, ErrUnavailable)
	if err != nil && !failed {
		return // the caller's own error, a conflict: says nothing of the store
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case failed && m.health.Healthy:
		m.health = Health{Healthy: false, Error: err.Error(), Since: m.clock.Now(), Failures: m.health.Failures + 1}
	case failed:
		m.health.Error = err.Error()
		m.health.Failures++
	case !m.health.Healthy:
		m.health = Health{Healthy: true, Since: m.clock.Now(), Failures: m.health.Failures}
	}
}

// Health is the store's current health.
func (m *Monitor) Health() Health {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.health
}
