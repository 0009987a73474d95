// Package memlease is store.Leases in memory, on an injected clock: the
// same terms, epochs and expiry as the PostgreSQL lease, for testing the
// elector (and anything that leads) on a fake clock without a database.
package memlease

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/store"
	"k8s.io/utils/clock"
)

// Leases is a lease table whose time is clock's.
type Leases struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	rows  map[string]*row
	// cut makes AcquireLease hang until its context ends, for holders in
	// it (a server cut off from the database).
	cut map[string]bool
}

type row struct {
	holder  string
	epoch   int64
	expires time.Time
}

var _ store.Leases = (*Leases)(nil)

// New returns an empty table on clk.
func New(clk clock.PassiveClock) *Leases {
	return &Leases{clock: clk, rows: map[string]*row{}, cut: map[string]bool{}}
}

// AcquireLease implements store.Leases.
func (l *Leases) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, error) {
	l.mu.Lock()
	if l.cut[holder] {
		l.mu.Unlock()
		<-ctx.Done()
		return store.Lease{}, fmt.Errorf("acquire lease %s: %w: %w", name, store.ErrUnavailable, ctx.Err())
	}
	defer l.mu.Unlock()
	now := l.clock.Now()
	r, ok := l.rows[name]
	switch {
	case !ok:
		r = &row{holder: holder, epoch: 1}
		l.rows[name] = r
	case r.holder == holder && now.Before(r.expires):
	case r.holder == holder || !now.Before(r.expires):
		r.holder, r.epoch = holder, r.epoch+1
	default:
		return store.Lease{}, fmt.Errorf("lease %s: %w", name, store.ErrLeaseHeld)
	}
	r.expires = now.Add(ttl)
	return store.Lease{Name: name, Holder: holder, Epoch: r.epoch}, nil
}

// ReleaseLease implements store.Leases.
func (l *Leases) ReleaseLease(ctx context.Context, lease store.Lease) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.rows[lease.Name]; ok && r.holder == lease.Holder && r.epoch == lease.Epoch {
		r.expires = l.clock.Now()
	}
	return nil
}

// Check is CheckLease's rule: lease is the current, unexpired term.
func (l *Leases) Check(lease store.Lease) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.rows[lease.Name]
	if !ok || r.holder != lease.Holder || r.epoch != lease.Epoch || !l.clock.Now().Before(r.expires) {
		return fmt.Errorf("lease %s epoch %d: %w", lease.Name, lease.Epoch, store.ErrFenced)
	}
	return nil
}

// Cut makes holder's calls hang (true) or answer again (false).
func (l *Leases) Cut(holder string, on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut[holder] = on
}
