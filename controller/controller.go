// Package controller runs the server's control loop: one pass keeps
// replicas in line with services, notices lost machines, places pending
// replicas (scheduler), sizes capacity groups (planner) and launches or
// removes machines (fleet). Each pass reads a fresh snapshot of the store.
package controller

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/metrics"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/scheduler"
	"github.com/gantry-dev/gantry/store"
)

// Config tunes the loop.
type Config struct {
	// Interval between passes (a pass also runs when triggered).
	Interval time.Duration
	// HeartbeatInterval is the agents' base heartbeat period.
	HeartbeatInterval time.Duration
	// MaxHeartbeatsPerSecond stretches the heartbeat period of large fleets
	// so the server receives at most this many heartbeats per second.
	MaxHeartbeatsPerSecond float64
	// MissedHeartbeats after which a machine is considered unreachable and
	// replaced.
	MissedHeartbeats int
	// RescheduleGrace is how long the replicas of an unreachable machine
	// wait for it to come back before they are rescheduled (and it is
	// terminated).
	RescheduleGrace time.Duration
	// LaunchBackoff is the first wait after a failed launch in a group; it
	// doubles per consecutive failure up to MaxLaunchBackoff.
	LaunchBackoff    time.Duration
	MaxLaunchBackoff time.Duration
	// UnavailableTTL is how long an offering that ran out of capacity is
	// avoided.
	UnavailableTTL time.Duration
	// DrainDeadline bounds how long a machine the planner removes may take
	// to move its replicas off.
	DrainDeadline time.Duration
	// ProviderRuntimes is what the machines of each provider will offer,
	// used to plan machines before their agents report; providers not
	// listed run the docker runtime.
	ProviderRuntimes map[string][]string
	Planner          planner.Config
}

// DefaultConfig returns production defaults.
func DefaultConfig() Config {
	return Config{
		Interval: 2 * time.Second, HeartbeatInterval: 5 * time.Second, MaxHeartbeatsPerSecond: 200, MissedHeartbeats: 3, RescheduleGrace: 30 * time.Second,
		LaunchBackoff: 5 * time.Second, MaxLaunchBackoff: 5 * time.Minute, UnavailableTTL: 3 * time.Minute, DrainDeadline: 10 * time.Minute,
		ProviderRuntimes: map[string][]string{"local": {scheduler.RuntimeProcess}},
		Planner:          planner.DefaultConfig(),
	}
}

// RuntimesOf is what the machines of a provider offer before they report
// their own.
func (c Config) RuntimesOf(provider string) []string {
	if r, ok := c.ProviderRuntimes[provider]; ok {
		return r
	}
	return []string{scheduler.RuntimeDocker}
}

// Controller is the control loop.
type Controller struct {
	cfg       Config
	store     store.Store
	fleet     *fleet.Fleet
	providers *fleet.Providers
	log       *slog.Logger
	metrics   *metrics.Metrics
	trigger   chan struct{}
	ready     chan struct{}
	startedAt time.Time

	mu          sync.Mutex
	live        int
	desired     map[string]int
	idleSince   map[string]time.Time
	failures    map[string]launchFailure
	unavailable *planner.Unavailable
	conditions  map[string]api.Condition // cluster → ProviderReady
	rolling     map[string]bool          // groups with a rollout under way
}

type launchFailure struct {
	count int
	until time.Time
}

// New returns a controller; m may be nil.
func New(cfg Config, st store.Store, fl *fleet.Fleet, providers *fleet.Providers, log *slog.Logger, m *metrics.Metrics) *Controller {
	return &Controller{
		cfg: cfg, store: st, fleet: fl, providers: providers, log: log, metrics: m,
		trigger: make(chan struct{}, 1), ready: make(chan struct{}), startedAt: time.Now(),
		desired: map[string]int{}, idleSince: map[string]time.Time{}, failures: map[string]launchFailure{},
		unavailable: planner.NewUnavailable(cfg.UnavailableTTL),
		conditions:  map[string]api.Condition{},
		rolling:     map[string]bool{},
	}
}

// Trigger asks for a pass soon (after an apply, a join, a status change).
func (c *Controller) Trigger() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

// HeartbeatInterval is the period agents are told to use: the base period,
// stretched for large fleets.
func (c *Controller) HeartbeatInterval(liveMachines int) time.Duration {
	iv := c.cfg.HeartbeatInterval
	if c.cfg.MaxHeartbeatsPerSecond > 0 {
		if sized := time.Duration(float64(liveMachines) / c.cfg.MaxHeartbeatsPerSecond * float64(time.Second)); sized > iv {
			iv = sized
		}
	}
	return iv
}

// CurrentHeartbeatInterval is HeartbeatInterval for the fleet size seen
// by the last pass (heartbeats must not cost a scan of all machines).
func (c *Controller) CurrentHeartbeatInterval() time.Duration {
	c.mu.Lock()
	live := c.live
	c.mu.Unlock()
	return c.HeartbeatInterval(live)
}

// Conditions are a cluster's current conditions (for status).
func (c *Controller) Conditions(cluster string) []api.Condition {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cond, ok := c.conditions[cluster]; ok {
		return []api.Condition{cond}
	}
	return nil
}

// setProviderReady records whether the cluster's provider accepts Gantry's
// credentials, with an event when that changes.
func (c *Controller) setProviderReady(ctx context.Context, cluster string, ready bool, message string, now time.Time) {
	status, reason := "True", ""
	if !ready {
		status, reason = "False", "AuthFailed"
	}
	c.mu.Lock()
	prev, had := c.conditions[cluster]
	changed := !had || prev.Status != status
	if changed {
		c.conditions[cluster] = api.Condition{Type: api.ConditionProviderReady, Status: status, Reason: reason, Message: message, LastTransitionTime: now.UTC()}
	}
	c.mu.Unlock()
	if !changed || (!had && ready) {
		return
	}
	typ, why := api.EventNormal, "provider accepts the credentials again"
	if !ready {
		typ, why = api.EventWarning, "provider refuses the credentials: "+message
	}
	_ = c.store.Update(ctx, func(tx store.Tx) error {
		return store.Record(tx, typ, api.ConditionProviderReady, api.KindCluster, cluster, "%s", why)
	})
}

// Desired returns the last planned size of a group (for status).
func (c *Controller) Desired(cluster, group string) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.desired[planner.Key(cluster, group)]
	return n, ok
}

// Ready is closed once recovery and the first pass are done: from then on
// the store reflects what really runs.
func (c *Controller) Ready() <-chan struct{} { return c.ready }

// Run recovers the fleet, then runs passes until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if err := c.fleet.Recover(ctx); err != nil {
		c.log.Error("fleet recovery", "err", err)
	}
	ticker := time.NewTicker(c.cfg.Interval)
	defer ticker.Stop()
	for first := true; ; first = false {
		if err := c.Pass(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("reconcile pass", "err", err)
		}
		if first {
			close(c.ready)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-c.trigger:
		}
	}
}

// Pass runs one reconcile pass.
func (c *Controller) Pass(ctx context.Context) error {
	start := time.Now()
	defer func() { c.metrics.Reconciled(time.Since(start).Seconds()) }()
	snap, err := c.load(ctx)
	if err != nil {
		return err
	}
	if err := c.syncReplicas(ctx, snap); err != nil {
		return fmt.Errorf("sync replicas: %w", err)
	}
	now := time.Now()
	c.mu.Lock()
	c.live = len(snap.liveMachines())
	c.mu.Unlock()
	c.detectLost(ctx, snap, now)
	c.finishDrains(ctx, snap, now)
	c.rollout(ctx, snap, now)
	c.fleet.Check(ctx, snap.liveMachines(), now)
	if snap, err = c.load(ctx); err != nil {
		return err
	}
	c.metrics.SetFleet(fleetCounts(snap))
	v := c.buildView(snap, now)
	reasons, unplaced, err := c.schedule(ctx, snap, v)
	if err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	return c.plan(ctx, snap, v, reasons, unplaced, now)
}

// detectLost marks joined machines whose heartbeats stopped unreachable
// (the planner replaces them at once) and, after the reschedule grace,
// terminates them, which reschedules their replicas. After a server start,
// the clock starts at the start: machines get a full period to reach the
// new server.
func (c *Controller) detectLost(ctx context.Context, snap *snapshot, now time.Time) {
	live := len(snap.liveMachines())
	limit := c.HeartbeatInterval(live) * time.Duration(c.cfg.MissedHeartbeats)
	for _, m := range snap.machines {
		if m.JoinState != api.JoinJoined || (m.FleetState != api.FleetReady && m.FleetState != api.FleetActive && m.FleetState != api.FleetDraining) {
			continue
		}
		last := c.startedAt
		if m.LastHeartbeat != nil && m.LastHeartbeat.After(last) {
			last = *m.LastHeartbeat
		}
		switch {
		case now.Sub(last) <= limit:
		case m.UnreachableSince == nil:
			c.log.Warn("machine unreachable", "machine", m.ID, "lastHeartbeat", last)
			c.markUnreachable(ctx, m.ID, now, fmt.Sprintf("no heartbeat for %s (limit %s); replicas move after %s unless it returns",
				now.Sub(last).Round(time.Second), limit, c.cfg.RescheduleGrace))
		case now.Sub(*m.UnreachableSince) >= c.cfg.RescheduleGrace:
			_ = c.fleet.Terminate(ctx, m.ID, fleet.CauseUnreachable, fmt.Sprintf("unreachable for %s (no heartbeat since %s)", now.Sub(*m.UnreachableSince).Round(time.Second), last.UTC().Format(time.RFC3339)))
		}
	}
}

// finishDrains terminates draining machines that hold no replica any more,
// or whose deadline has passed.
func (c *Controller) finishDrains(ctx context.Context, snap *snapshot, now time.Time) {
	holds := map[string]int{}
	for _, r := range snap.replicas {
		holds[r.Machine]++
		if r.PreviousMachine != "" {
			holds[r.PreviousMachine]++
		}
	}
	for _, m := range snap.machines {
		if m.FleetState != api.FleetDraining {
			continue
		}
		switch {
		case holds[m.ID] == 0:
			_ = c.fleet.Terminate(ctx, m.ID, fleet.CauseDrained, "drained: "+m.Reason)
		case m.DrainDeadline != nil && now.After(*m.DrainDeadline):
			_ = c.fleet.Terminate(ctx, m.ID, fleet.CauseDrained, fmt.Sprintf("drain deadline passed with %d replica(s) still on it", holds[m.ID]))
		}
	}
}

func (c *Controller) markUnreachable(ctx context.Context, id string, now time.Time, why string) {
	err := c.store.Update(ctx, func(tx store.Tx) error {
		m, err := tx.GetMachine(id)
		if err != nil || m.UnreachableSince != nil {
			return err
		}
		t := now.UTC()
		m.UnreachableSince, m.Reason = &t, why
		if err := tx.PutMachine(m); err != nil {
			return err
		}
		return store.Record(tx, api.EventWarning, "Unreachable", "Machine", id, "%s", why)
	})
	if err != nil {
		c.log.Error("mark machine unreachable", "machine", id, "err", err)
	}
}
