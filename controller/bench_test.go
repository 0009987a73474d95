package controller

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/decidetest"
	"github.com/gantry-dev/gantry/provider/registry"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/fake"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/sqlite"
	"github.com/gantry-dev/gantry/store/view"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// BenchmarkPassSteady is a whole pass of a leader on a SQLite store
// holding a steady fleet, where nothing is to be done: what the leader
// pays every interval. "incremental" is the pass as it runs: it reads
// the changes since the last pass (none) and the heartbeats, and skips
// decide, since nothing it decides from changed; "view" decides anyway
// (every pass in full: --full-pass-interval 0); "reread" also reads the
// whole store, as every pass did before the view:
//
//	go test ./controller -run '^$' -bench PassSteady -benchtime 5x -count 6 -timeout 30m
func BenchmarkPassSteady(b *testing.B) {
	for _, size := range []struct{ machines, services int }{{1000, 100}, {10000, 1000}} {
		c := steadyFleet(b, size.machines, size.services)
		name := fmt.Sprintf("machines=%d/replicas=%d", size.machines, size.services*100)
		b.Run(name+"/incremental", func(b *testing.B) { benchPass(b, c, passIncremental) })
		b.Run(name+"/view", func(b *testing.B) { benchPass(b, c, passFull) })
		b.Run(name+"/reread", func(b *testing.B) { benchPass(b, c, passReread) })
	}
}

// BenchmarkPassAfterChanges is a pass after 1,000 services changed
// (each one replica more): it decides in full and places the 1,000 new
// replicas.
//
//	go test ./controller -run '^$' -bench PassAfterChanges -benchtime 3x -count 3 -timeout 30m
func BenchmarkPassAfterChanges(b *testing.B) {
	c := steadyFleet(b, 10000, 1000)
	b.Run("machines=10000/replicas=100000/changed=1000", func(b *testing.B) { benchChanged(b, c, 1000) })
}

// BenchmarkPassSteady50k is the same at 50,000 machines and 500,000
// replicas (a few minutes to build; its own benchmark so that the one
// above stays quick), then a pass after 1,000 services changed, and a
// pass after one did (what a lone change waits for before it is carried
// out, the floor of its decision's latency):
//
//	go test ./controller -run '^$' -bench PassSteady50k -benchtime 3x -count 1 -timeout 60m
func BenchmarkPassSteady50k(b *testing.B) {
	c := steadyFleet(b, 50000, 5000)
	b.Run("incremental", func(b *testing.B) { benchPass(b, c, passIncremental) })
	b.Run("view", func(b *testing.B) { benchPass(b, c, passFull) })
	b.Run("changed=1000", func(b *testing.B) { benchChanged(b, c, 1000) })
	b.Run("changed=1", func(b *testing.B) { benchChanged(b, c, 1) })
	// As a server runs: every machine's heartbeat recorded (the liveness
	// table a sync reads whole), none late.
	hb := newHeartbeats(b, c)
	b.Run("changed=1,beating", func(b *testing.B) {
		recordBeats(b, hb)
		benchChanged(b, c, 1)
	})
	// And a second of a 50,000-machine fleet's heartbeats (5,000, every
	// machine's each ten seconds) recorded before each pass.
	b.Run("changed=1,beats=5000", func(b *testing.B) { benchChangedBeating(b, c, 1, hb, 5000) })
}

// recordBeats records a heartbeat of every live machine.
func recordBeats(b *testing.B, hb *heartbeats) {
	if err := hb.record(context.Background(), len(hb.ids)); err != nil {
		b.Fatal(err)
	}
}

// heartbeats records the live machines' heartbeats in turn, as servers
// flush them.
type heartbeats struct {
	c    *Controller
	ids  []string
	next int
	last time.Time
}

func newHeartbeats(b *testing.B, c *Controller) *heartbeats {
	var ids []string
	err := c.Store.View(context.Background(), func(tx store.Tx) error {
		machines, err := tx.ListMachines(store.MachineFilter{LiveOnly: true})
		for _, m := range machines {
			ids = append(ids, m.ID)
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return &heartbeats{c: c, ids: ids}
}

// record records the next n machines' heartbeats now, in one write.
func (h *heartbeats) record(ctx context.Context, n int) error {
	beats := make(map[string]time.Time, n)
	// Each record's heartbeats later than the last's, even while a fake
	// clock stands still: a heartbeat no later than the recorded one is
	// no change.
	now := h.c.Clock.Now()
	if !now.After(h.last) {
		now = h.last.Add(time.Millisecond)
	}
	h.last = now
	for range min(n, len(h.ids)) {
		beats[h.ids[h.next]] = now
		h.next = (h.next + 1) % len(h.ids)
	}
	return h.c.Store.Update(ctx, func(tx store.Tx) error { return tx.PutLiveness(beats) })
}

// benchChanged times a pass after n services each gained a replica
// (written before the timer runs).
func benchChanged(b *testing.B, c *Controller, n int) { benchChangedBeating(b, c, n, nil, 0) }

// benchChangedBeating is benchChanged with beats heartbeats of hb
// recorded before each pass.
func benchChangedBeating(b *testing.B, c *Controller, n int, hb *heartbeats, beats int) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		err := c.Store.Update(ctx, func(tx store.Tx) error {
			services, err := tx.ListServices()
			if err != nil {
				return err
			}
			for _, s := range services[:n] {
				more := *s
				replicas := *s.Spec.Replicas + 1
				more.Spec.Replicas = &replicas
				if err := tx.PutService(&more); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil && beats > 0 {
			err = hb.record(ctx, beats)
		}
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		plan, err := c.pass(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(plan.CreateReplicas) != n {
			b.Fatalf("created %d replicas, want %d", len(plan.CreateReplicas), n)
		}
	}
}

// How a benchmark's passes run.
const (
	passIncremental = iota
	passFull
	passReread
)

func benchPass(b *testing.B, c *Controller, mode int) {
	ctx := context.Background()
	b.ReportAllocs()
	interval := c.cfg.FullPassInterval
	defer func() { c.cfg.FullPassInterval = interval }()
	if mode != passIncremental {
		c.cfg.FullPassInterval = 0
	}
	for b.Loop() {
		if mode == passReread {
			c.view = view.New(c.cfg.ViewBatch, c.cfg.ViewChangeLog)
		}
		plan, err := c.pass(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if n := len(plan.Assignments) + len(plan.Launches) + len(plan.CreateReplicas) + len(plan.Terminates); n != 0 {
			b.Fatalf("a steady fleet's pass decided %d changes", n)
		}
	}
}

// steadyFleet stores machines machines of the harness provider running
// services services of 100 replicas each, and returns a controller on it
// whose first pass (the view's first read) is done, on a fake clock.
func steadyFleet(b *testing.B, machines, services int) *Controller {
	b.Helper()
	return steadyFleetOn(b, machines, services, func(start time.Time) benchClock { return clocktesting.NewFakeClock(start) })
}

// benchClock is the clock a benchmark's store and controller share.
type benchClock interface {
	clock.WithTicker
}

// steadyFleetOn is steadyFleet on the clock clockAt makes, starting at
// the harness's time.
func steadyFleetOn(b *testing.B, machines, services int, clockAt func(start time.Time) benchClock) *Controller {
	b.Helper()
	h := decidetest.New(b)
	h.Cluster("c", decidetest.Group("g", "large", 0, 2*machines))
	ids := make([]string, 0, machines)
	for range machines {
		ids = append(ids, h.Machine("c", "g", "large").ID)
	}
	for s := range services {
		name := fmt.Sprintf("svc%d", s)
		h.Service(name, "c", 100, "100m", "64Mi")
		for i := range 100 {
			h.Replica(name, i, ids[(s*100+i)%len(ids)])
		}
	}
	clk := clockAt(h.Now)
	cfg := sqlite.DefaultConfig(filepath.Join(b.TempDir(), "gantry.db"))
	cfg.Now = clk.Now
	db, err := sqlite.Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	err = db.Update(context.Background(), func(tx store.Tx) error {
		for _, cl := range h.Snap.Clusters {
			if err := tx.PutCluster(cl); err != nil {
				return err
			}
		}
		for _, s := range h.Snap.Services {
			if err := tx.PutService(s); err != nil {
				return err
			}
		}
		for _, m := range h.Snap.Machines {
			if err := tx.CreateMachine(m); err != nil {
				return err
			}
		}
		for _, r := range h.Snap.Replicas {
			if err := tx.PutReplica(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	signer, err := auth.NewSigner([]byte(auth.NewKey()))
	if err != nil {
		b.Fatal(err)
	}
	ccfg := DefaultConfig()
	ccfg.Decide.Planner.MaxRemovals = 0
	// The provider holds each machine's instance, tagged as Gantry tags
	// them: a list finds them all.
	prov := fake.New(decidetest.Provider, decidetest.Catalog(), clk)
	for _, inst := range listing(h.Snap.Machines, h.Now).Instances {
		inst.Tags[provisioner.TagManagedBy], inst.Tags[provisioner.TagInstallation] = provisioner.ManagedByValue, ccfg.Calls.InstallationID
		prov.Add(inst)
	}
	reg := registry.New(nil, registry.Static(prov, "process"))
	c := New(ccfg, Deps{Store: db, Registry: reg, Signer: signer, Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		// Heartbeats stand still: no machine counts as silent however long
		// the benchmark runs on a clock that moves.
		LivenessSince: clk.Now})
	// Listed just now, each machine's instance found: no pass lists the
	// provider while the clock stands still.
	c.observed.Listed(decidetest.Provider, listing(h.Snap.Machines, h.Now))
	for range 2 { // the first pass records the deployments as complete
		if _, err := c.pass(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	return c
}

// listing is a provider's inventory at at holding each machine's instance.
func listing(machines []*api.Machine, at time.Time) decide.Inventory {
	inv := decide.Inventory{At: at}
	for _, m := range machines {
		inv.Instances = append(inv.Instances, provisioner.Instance{ID: m.ProviderID, State: provisioner.StateRunning, LaunchedAt: m.CreatedAt,
			Tags: map[string]string{provisioner.TagMachine: m.ID}})
	}
	return inv
}
