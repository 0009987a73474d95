// Package leader elects the one server that runs the control loop among
// several sharing a store. A server leads while it holds the store's
// lease; each term has an epoch that fences its writes (Fence), and it
// stops making provider calls RenewDeadline after its last successful
// renewal began, before the lease (LeaseDuration) can have passed to
// another server. Stores without leases (SQLite, locked to one server)
// make their only server the leader for good.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/internal/randid"
	"github.com/gantry-dev/gantry/store"
	"k8s.io/utils/clock"
)

// LeaseName is the lease the control loop's leader holds.
const LeaseName = "leader"

// Config tunes the election.
type Config struct {
	// LeaseDuration is how long a term lasts unless renewed: how long the
	// servers wait for a leader that stopped answering.
	LeaseDuration time.Duration
	// RenewDeadline is how long after its last successful renewal began
	// the leader keeps leading; it must be shorter than LeaseDuration, and
	// the difference is the margin that covers a call in flight.
	RenewDeadline time.Duration
	// RetryPeriod is the time between renewals, and between a follower's
	// attempts to take the lease.
	RetryPeriod time.Duration
}

// DefaultConfig returns the defaults: a 15 s lease, renewed every 2 s,
// given up 10 s after the last renewal that succeeded.
func DefaultConfig() Config {
	return Config{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
}

// Validate names the setting that is wrong.
func (c Config) Validate() error {
	switch {
	case c.RetryPeriod <= 0:
		return fmt.Errorf("lease retry period %s: must be positive", c.RetryPeriod)
	case c.RenewDeadline <= c.RetryPeriod:
		return fmt.Errorf("lease renew deadline %s: must be longer than the retry period %s", c.RenewDeadline, c.RetryPeriod)
	case c.LeaseDuration <= c.RenewDeadline:
		return fmt.Errorf("lease duration %s: must be longer than the renew deadline %s", c.LeaseDuration, c.RenewDeadline)
	}
	return nil
}

// Elector campaigns for the lease and runs a term while it holds it.
type Elector struct {
	cfg    Config
	leases store.Leases // nil: this server leads for good
	holder string
	clock  clock.WithTicker
	log    *slog.Logger

	mu      sync.Mutex
	term    store.Lease
	leading bool
	// deadline is when the current term stops, unless renewed.
	deadline  time.Time
	termStart time.Time
	leader    string
	following chan struct{}
	followed  sync.Once
}

// New returns an elector for the server named holder ("" draws a name).
// leases is nil for a store of one server.
func New(cfg Config, leases store.Leases, holder string, clk clock.WithTicker, log *slog.Logger) *Elector {
	if holder == "" {
		holder = "server-" + randid.Hex(8)
	}
	return &Elector{cfg: cfg, leases: leases, holder: holder, clock: clk, log: log, following: make(chan struct{})}
}

// Following is closed once this server has seen another one lead.
func (e *Elector) Following() <-chan struct{} { return e.following }

// Holder is this server's name in the lease.
func (e *Elector) Holder() string { return e.holder }

// Term returns the current term while this server leads.
func (e *Elector) Term() (store.Lease, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.term, e.leadingLocked()
}

// Leading reports whether this server leads now: provider calls are made
// only while it does.
func (e *Elector) Leading() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leadingLocked()
}

func (e *Elector) leadingLocked() bool {
	return e.leading && (e.leases == nil || e.clock.Now().Before(e.deadline))
}

// TermStarted is when this server's current (or last) term began. A new
// leader knows nothing of the heartbeats before it: they may have failed
// to reach the store while nobody led.
func (e *Elector) TermStarted() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.termStart
}

// Leader is the holder this server last saw lead ("" when unknown).
func (e *Elector) Leader() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.leadingLocked() {
		return e.holder
	}
	return e.leader
}

// Run campaigns until ctx ends. Each term runs lead in a goroutine with a
// context that ends with the term (lost, not renewed in time, or ctx
// done); Run returns once the last term's lead has returned, after giving
// the lease up.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context, term store.Lease)) {
	if e.leases == nil {
		e.mu.Lock()
		e.leading, e.term, e.termStart = true, store.Lease{Name: LeaseName, Holder: e.holder}, e.clock.Now()
		e.mu.Unlock()
		lead(ctx, e.term)
		return
	}
	t := &terms{lead: lead}
	defer t.end()
	ticker := e.clock.NewTicker(e.cfg.RetryPeriod)
	defer ticker.Stop()
	for {
		e.campaign(ctx, t)
		select {
		case <-ctx.Done():
			term, ok := e.Term()
			e.mu.Lock()
			e.leading = false
			e.mu.Unlock()
			t.end()
			if ok {
				e.release(term)
			}
			return
		case <-ticker.C():
		case <-t.deadline():
			e.stepDownIfLate(t, errors.New("no renewal before the deadline"))
			continue
		}
	}
}

// campaign takes or renews the lease once, and starts or ends a term.
func (e *Elector) campaign(ctx context.Context, t *terms) {
	began := e.clock.Now()
	callCtx, cancel := context.WithTimeout(ctx, e.cfg.RetryPeriod)
	l, err := e.leases.AcquireLease(callCtx, LeaseName, e.holder, e.cfg.LeaseDuration)
	cancel()
	if err != nil {
		if errors.Is(err, store.ErrLeaseHeld) {
			e.setLeader("another server")
			e.followed.Do(func() { close(e.following) })
		} else if ctx.Err() == nil {
			e.log.Warn("leader lease", "err", err)
		}
		e.stepDownIfLate(t, err)
		return
	}
	e.mu.Lock()
	newTerm := !e.leading || l.Epoch != e.term.Epoch
	if newTerm {
		e.termStart = began
	}
	e.term, e.leading, e.leader = l, true, e.holder
	e.deadline = began.Add(e.cfg.RenewDeadline)
	e.mu.Unlock()
	t.wakeAt(e.clock, e.deadline)
	if newTerm {
		t.end()
		e.log.Info("leading", "holder", e.holder, "epoch", l.Epoch)
		t.begin(ctx, l)
	}
}

// stepDownIfLate ends the term once its deadline has passed without a
// renewal. The term's lead is waited for outside the lock: it asks
// Leading meanwhile.
func (e *Elector) stepDownIfLate(t *terms, err error) {
	e.mu.Lock()
	late := e.leading && !e.clock.Now().Before(e.deadline)
	if late {
		e.leading = false
	}
	epoch := e.term.Epoch
	e.mu.Unlock()
	if late {
		e.log.Warn("stepped down: the lease was not renewed in time", "epoch", epoch, "err", err)
		t.end()
	}
}

func (e *Elector) setLeader(name string) {
	e.mu.Lock()
	e.leader = name
	e.mu.Unlock()
}

func (e *Elector) release(term store.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.RetryPeriod)
	defer cancel()
	if err := e.leases.ReleaseLease(ctx, term); err != nil {
		e.log.Warn("give up the leader lease", "err", err)
	}
}

// terms runs one term at a time.
type terms struct {
	lead   func(context.Context, store.Lease)
	cancel context.CancelFunc
	done   chan struct{}
	timer  clock.Timer
}

func (t *terms) begin(ctx context.Context, l store.Lease) {
	termCtx, cancel := context.WithCancel(ctx)
	t.cancel, t.done = cancel, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		t.lead(termCtx, l)
	}(t.done)
}

// wakeAt wakes the campaign loop at the term's deadline, so that the term
// ends then even between two renewals.
func (t *terms) wakeAt(clk clock.Clock, deadline time.Time) {
	if t.timer != nil {
		t.timer.Stop()
	}
	t.timer = clk.NewTimer(deadline.Sub(clk.Now()))
}

func (t *terms) deadline() <-chan time.Time {
	if t.timer == nil {
		return nil
	}
	return t.timer.C()
}

// end stops the running term and waits for its lead to return.
func (t *terms) end() {
	if t.cancel == nil {
		return
	}
	t.cancel()
	<-t.done
	t.cancel, t.done = nil, nil
}
