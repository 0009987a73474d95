// Package controller runs the control loop. Each pass reads a snapshot of
// the store and of what the providers said, decides (package decide, a
// pure function), and acts: the plan's store writes in one transaction,
// intents first, then the provider calls it asks for, each in a worker
// bounded by the provider timeout, so that a slow or hung provider stalls
// neither the pass nor the other clusters.
package controller

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/metrics"
	"github.com/gantry-dev/gantry/provider/registry"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/view"
	"github.com/gantry-dev/gantry/target"
	"github.com/gantry-dev/gantry/target/machines"
	"k8s.io/utils/clock"
)

// Config tunes the loop.
type Config struct {
	// Interval from a pass to the next when nothing triggers one sooner
	// (a trigger starts a pass at once).
	Interval time.Duration
	// MaxDutyCycle bounds the share of time the loop spends in passes:
	// a pass of duration d owes a rest of d×(1/MaxDutyCycle−1), which the
	// time between passes pays back, so that a large fleet's passes leave
	// the CPU to the API and the heartbeats (1: no rest; see dutyBudget).
	MaxDutyCycle float64
	// DutyWindow is the window MaxDutyCycle holds over: the loop rests
	// only for what it owes beyond (1−MaxDutyCycle)×DutyWindow, so that a
	// change finding the loop idle is decided at once, and a burst of
	// changes gets passes back to back for up to MaxDutyCycle×DutyWindow
	// (0: every pass is followed by its whole rest).
	DutyWindow time.Duration
	// MaxRest caps that rest: after a pass that took minutes (a join
	// storm's), a change waits no longer than this to be decided.
	MaxRest time.Duration
	Decide  decide.Config
	Calls   machines.CallConfig
	// PlacementBatch is how many replicas' writes (made, placed, evicted
	// or given a pending reason) commit in one transaction of the act,
	// after its other writes (0: all in one).
	PlacementBatch int
	// ViewBatch is how many changes of the feed the pass's view reads at
	// a time.
	ViewBatch int
	// ViewChangeLog is how many of the changes it applied the view keeps,
	// from which a pass learns what changed since the last booked its
	// machines; further apart, a pass books them all afresh.
	ViewChangeLog int
	// FullPassInterval: a pass after one that decided nothing is skipped
	// while nothing it decides from changed and no deadline came (the
	// incremental loop), but at least this often the pass runs in full
	// anyway, as a safety net that must find nothing. 0: every pass is
	// full.
	FullPassInterval time.Duration
}

// DefaultConfig returns production defaults.
func DefaultConfig() Config {
	return Config{Interval: 2 * time.Second, MaxDutyCycle: 0.5, DutyWindow: 10 * time.Second, MaxRest: 10 * time.Second, Decide: decide.DefaultConfig(), ViewBatch: view.DefaultBatch, ViewChangeLog: view.DefaultChangeLog, PlacementBatch: 500, FullPassInterval: 5 * time.Minute,
		Calls: machines.CallConfig{ProviderTimeout: time.Minute, Concurrency: 8, JoinTokenTTL: 15 * time.Minute, ConsoleTailLines: 20}}
}

// Deps are what the controller works with.
type Deps struct {
	Store    store.Store
	Registry *registry.Registry
	Signer   *auth.Signer
	Clock    clock.WithTicker
	Log      *slog.Logger
	// Metrics may be nil.
	Metrics *metrics.Metrics
	// Tracer traces passes and provider calls (nil: not traced).
	Tracer trace.Tracer
	// LivenessSince is when the server began to record heartbeats
	// reliably (decide.Snapshot.LivenessSince).
	LivenessSince func() time.Time
	// Leading reports whether this server still leads; provider calls
	// are made only while it does (nil: always).
	Leading func() bool
	// Kubernetes, when set, is what the Kubernetes clusters' watches know
	// (decide.Snapshot.Kubernetes).
	Kubernetes func() map[string]target.KubernetesObservation
	// AfterPass, when set, is called after every pass.
	AfterPass func()
	// View, when set, is the server's view of the store, shared with the
	// heartbeat path (nil: the controller keeps its own).
	View *view.View
	// Heartbeats, when set, lays the heartbeats this server holds in
	// memory (not flushed yet) into the heartbeats a pass reads, aligned
	// with its machines (sorted by id; decide.Snapshot.Heartbeats), and
	// returns them.
	Heartbeats func(machines []*api.Machine, beats []int64) []int64
}

// Controller is the control loop.
type Controller struct {
	cfg Config
	Deps
	calls    *machines.Calls
	observed *machines.Observations
	trigger  chan struct{}
	ready    chan struct{}
	readyOne sync.Once

	mu   sync.Mutex
	live int
	// feed is where the passes are in the change feed (the pass
	// goroutine's alone).
	feed feedPosition
	// view is the store's objects as the last pass read them, followed
	// through the change feed.
	view *view.View
	// quiet is the last pass, when it decided nothing; lastDecided when
	// the last pass decided (the pass goroutine's alone).
	quiet       *quietPass
	lastDecided time.Time
	// booked is the last pass's booking of its machines, a memo for the
	// next, made from the store at revision bookedAt (the pass
	// goroutine's alone).
	booked   *decide.Booking
	bookedAt int64
	// consolidatedAt is when a pass last looked for machines to remove
	// (decide.Snapshot.ConsolidatedAt; the pass goroutine's alone, and
	// forgotten with the term: a new leader looks at once).
	consolidatedAt time.Time
	// scratch is the memory each pass works in (the loop's passes run
	// one at a time).
	scratch decide.Scratch
	// memory decodes the memory's entries for the passes, each once (the
	// pass goroutine's alone).
	memory decide.MemoryDecoder
	// pending are the replicas on no machine by cluster, as the last
	// pass read them (the pass goroutine's alone).
	pending map[string]int
	// machineStates are the live machines by cluster and state, as the
	// last pass's view counted them.
	machineStates []view.MachineStates
}

// New returns a controller.
func New(cfg Config, d Deps) *Controller {
	c := &Controller{cfg: cfg, Deps: d, observed: machines.NewObservations(), trigger: make(chan struct{}, 1), ready: make(chan struct{}),
		view: d.View, feed: feedPosition{batch: cmp.Or(cfg.ViewBatch, view.DefaultBatch)}}
	if c.view == nil {
		c.view = view.New(cfg.ViewBatch, cfg.ViewChangeLog)
	}
	c.calls = machines.NewCalls(cfg.Calls, machines.Deps{Store: d.Store, Registry: d.Registry, Signer: d.Signer, Clock: d.Clock, Log: d.Log,
		Metrics: d.Metrics, Tracer: d.Tracer, Leading: d.Leading}, c.observed, c.Trigger)
	return c
}

// Trigger asks for a pass soon (after an apply, a join, a status change).
func (c *Controller) Trigger() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

// HeartbeatInterval is the period agents are told to use, sized to the
// fleet the last pass saw (heartbeats must not cost a scan of all
// machines).
func (c *Controller) HeartbeatInterval() time.Duration {
	c.mu.Lock()
	live := c.live
	c.mu.Unlock()
	return c.cfg.Decide.HeartbeatIntervalFor(live)
}

// Ready is closed once the first pass is done. Recovery goes on in the
// background: a provider that does not answer delays nothing else.
func (c *Controller) Ready() <-chan struct{} { return c.ready }

// Run runs passes until ctx ends, then waits for the provider calls under
// way, which run under ctx and so end with it. It runs once per
// leadership term (ctx is the term's): what the last term observed of the
// providers is forgotten, the store is the memory.
func (c *Controller) Run(ctx context.Context) {
	c.calls.SetTerm(ctx)
	defer func() {
		// The term's calls are cancelled with it (ctx): waiting for them
		// takes only as long as a provider takes to see that.
		c.calls.Wait()
		c.calls.SetTerm(context.Background())
	}()
	c.observed.Reset()
	c.quiet, c.booked, c.consolidatedAt = nil, nil, time.Time{} // a new term decides afresh
	var budget dutyBudget
	for {
		began := c.Clock.Now()
		if err := c.Pass(ctx); err != nil && ctx.Err() == nil {
			c.Log.Error("reconcile pass", "err", err)
		}
		budget.passed(c.cfg, c.Clock.Now(), c.Clock.Since(began))
		c.readyOne.Do(func() { close(c.ready) })
		if c.AfterPass != nil {
			c.AfterPass()
		}
		if !c.await(ctx) {
			return
		}
		if !c.rest(ctx, budget.rest(c.cfg, c.Clock.Now())) {
			return
		}
	}
}

// await waits for a trigger, or for Interval after the last pass; false
// when ctx ended. Timed from the pass, not a fixed ticker: a pass that a
// change triggered has seen the clock too, and a tick soon after it
// would only add a pass for a later change to wait behind (at one change
// a second, the ticker's passes were a third of all).
func (c *Controller) await(ctx context.Context) bool {
	timer := c.Clock.NewTimer(c.cfg.Interval)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C():
	case <-c.trigger:
	}
	return true
}

// rest waits for wait; false when ctx ended.
func (c *Controller) rest(ctx context.Context, wait time.Duration) bool {
	if wait <= 0 {
		return ctx.Err() == nil
	}
	timer := c.Clock.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C():
		return true
	}
}

// Pass runs one pass: load, decide, act.
func (c *Controller) Pass(ctx context.Context) error {
	_, err := c.pass(ctx)
	return err
}

func (c *Controller) pass(ctx context.Context) (plan decide.Plan, err error) {
	start := c.Clock.Now()
	defer func() { c.Metrics.Reconciled(c.Clock.Since(start).Seconds()) }()
	ctx, span := c.tracer().Start(ctx, "gantry.pass")
	defer func() { endSpan(span, err) }()
	snap, mem, revision, err := c.load(ctx)
	if err != nil {
		return decide.Plan{}, err
	}
	now := c.Clock.Now()
	asleep := c.asleep(snap, revision, now)
	if asleep && !c.safetyNetDue(now) {
		c.Metrics.Passed(metrics.PassSkipped)
		return decide.Plan{}, nil
	}
	if !asleep { // the safety net decides without the memos too
		snap.Booked, snap.Changed = c.booked, c.changedSince(c.bookedAt, revision)
	}
	snap.Scratch, snap.ConsolidatedAt = &c.scratch, c.consolidatedAt
	plan = c.decide(ctx, snap, mem)
	c.quiet, c.lastDecided, c.booked, c.bookedAt, c.consolidatedAt = nil, now, plan.Booked, revision, plan.ConsolidatedAt
	c.checkSafetyNet(asleep, snap, mem, &plan)
	c.mu.Lock()
	c.live = plan.LiveMachines
	c.mu.Unlock()
	c.Metrics.SetFleet(fleetCounts(snap, c.machineStates, c.pending))
	actCtx, actSpan := c.tracer().Start(ctx, "gantry.act")
	own, err := c.act(actCtx, snap, mem, plan)
	endSpan(actSpan, err)
	if err != nil {
		c.observed.Relist(snap.Inventories)
		return plan, fmt.Errorf("act: %w", err)
	}
	c.recordRollouts(mem, plan.Memory)
	c.recordDecision(plan, revision, own)
	c.rememberQuiet(snap, mem, revision, plan)
	return plan, nil
}

// Wait blocks until the provider calls under way have finished.
func (c *Controller) Wait() { c.calls.Wait() }

// TerminateAll stops every live machine at once and waits for their
// providers (`gantry dev` on exit, with the loop stopped); report is told
// each machine as it is stopped.
func (c *Controller) TerminateAll(ctx context.Context, reason string, report func(*api.Machine)) error {
	now := c.Clock.Now()
	var machines []*api.Machine
	err := c.Store.Update(ctx, func(tx store.Tx) error {
		var err error
		if machines, err = tx.ListMachines(store.MachineFilter{LiveOnly: true}); err != nil {
			return err
		}
		w := &writer{tx: tx, now: now}
		for _, m := range machines {
			if err := w.terminate(decide.Terminate{Machine: m.ID, Cause: decide.CauseShutdown, Reason: reason}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, m := range machines {
		if report != nil {
			report(m)
		}
		c.calls.Terminate(m.ID, registry.KeyOf(m), "")
	}
	c.calls.Wait()
	return nil
}
