package controller

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/provider/external"
	"github.com/gantry-dev/gantry/provider/registry"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/fake"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/sqlite"
	"github.com/gantry-dev/gantry/store/storetest"
	clocktesting "k8s.io/utils/clock/testing"
)

// env is a controller on a real SQLite store (whose every Update runs its
// function twice, to prove the act step keeps to the store's contract),
// with in-memory providers and a fake clock. A pass acts for real; the
// provider calls it starts are waited for.
type env struct {
	t        *testing.T
	clock    *clocktesting.FakeClock
	store    store.Store
	db       *sqlite.Store
	signer   *auth.Signer
	registry *registry.Registry
	fakes    map[string]*fake.Provider
	ctrl     *Controller
	cfg      Config
	liveness time.Time
}

var start = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func newEnv(t *testing.T, providers ...string) *env {
	t.Helper()
	if len(providers) == 0 {
		providers = []string{"fake"}
	}
	clk := clocktesting.NewFakeClock(start)
	storeCfg := sqlite.DefaultConfig(filepath.Join(t.TempDir(), "gantry.db"))
	storeCfg.Now = clk.Now
	db, err := sqlite.Open(context.Background(), storeCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	signer, err := auth.NewSigner([]byte(auth.NewKey()))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, clock: clk, store: storetest.Rerun(db), db: db, signer: signer, fakes: map[string]*fake.Provider{},
		cfg: DefaultConfig(), liveness: start.Add(-time.Hour)}
	e.cfg.Calls.ServerURL, e.cfg.Calls.InstallationID = "http://gantry.test", "inst-1"
	entries := []registry.Entry{external.Entry()}
	for _, name := range providers {
		e.fakes[name] = fake.New(name, nil, e.clock)
		entries = append(entries, registry.Static(e.fakes[name], "process"))
	}
	e.registry = registry.New(nil, entries...)
	e.restart()
	return e
}

// restart makes a new controller on the same store, as a server killed
// and started again (or another one taking over) would: nothing of the
// old one's memory survives but what is in the store.
func (e *env) restart() {
	e.ctrl = New(e.cfg, Deps{Store: e.store, Registry: e.registry, Signer: e.signer, Clock: e.clock,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), LivenessSince: func() time.Time { return e.liveness }})
}

// apply stores the resources of a spec file.
func (e *env) apply(file string) {
	e.t.Helper()
	docs, err := spec.Parse("test.yaml", []byte(file), e.registry)
	if err != nil {
		e.t.Fatal(err)
	}
	e.update(func(tx store.Tx) error {
		for _, d := range docs {
			if d.Cluster != nil {
				if err := tx.PutCluster(d.Cluster); err != nil {
					return err
				}
			} else if err := tx.PutService(d.Service); err != nil {
				return err
			}
		}
		return nil
	})
}

// pass runs one pass and waits for the provider calls it started.
func (e *env) pass() decide.Plan {
	e.t.Helper()
	plan, err := e.ctrl.pass(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	e.ctrl.Wait()
	return plan
}

func (e *env) update(fn func(tx store.Tx) error) {
	e.t.Helper()
	if err := e.db.Update(context.Background(), fn); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) machines() []*api.Machine {
	var out []*api.Machine
	e.view(func(tx store.Tx) (err error) { out, err = tx.ListMachines(store.MachineFilter{}); return })
	return out
}

func (e *env) events(kind, name string) []*api.Event {
	var out []*api.Event
	e.view(func(tx store.Tx) (err error) {
		out, err = tx.ListEvents(store.EventFilter{ObjectKind: kind, ObjectName: name})
		return
	})
	return out
}

func (e *env) memory() decide.Memory {
	var entries map[string]string
	e.view(func(tx store.Tx) (err error) { entries, err = tx.ListMemory(); return })
	mem, err := decide.DecodeMemory(entries)
	if err != nil {
		e.t.Fatal(err)
	}
	return mem
}

func (e *env) view(fn func(tx store.Tx) error) {
	e.t.Helper()
	if err := e.db.View(context.Background(), fn); err != nil {
		e.t.Fatal(err)
	}
}

// join makes every booting machine's agent join.
func (e *env) join() {
	e.update(func(tx store.Tx) error {
		ms, err := tx.ListMachines(store.MachineFilter{LiveOnly: true})
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.JoinState != api.JoinBooting {
				continue
			}
			m.JoinState, m.Runtimes = api.JoinJoined, []string{"process"}
			now := e.clock.Now()
			m.JoinedAt, m.LastHeartbeat = &now, &now
			if err := tx.PutMachine(m); err != nil {
				return err
			}
		}
		return nil
	})
}

func launchKeys(calls []fake.Call) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.Spec.IdempotencyKey)
	}
	return out
}

func instance(id, machine string, launched time.Time) provisioner.Instance {
	return provisioner.Instance{ID: id, State: provisioner.StateRunning, LaunchedAt: launched, Tags: map[string]string{
		provisioner.TagManagedBy: provisioner.ManagedByValue, provisioner.TagInstallation: "inst-1", provisioner.TagMachine: machine}}
}
