package machines

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/provider/registry"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/fake"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/sqlite"
	"github.com/gantry-dev/gantry/store/storetest"
	clocktesting "k8s.io/utils/clock/testing"
)

var start = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// env is the calls on a real SQLite store (whose every Update runs its
// function twice, to prove the calls keep to the store's contract), with an in-memory provider
// named "fake" and a fake clock.
type env struct {
	t     *testing.T
	store store.Store
	fake  *fake.Provider
	calls *Calls
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clk := clocktesting.NewFakeClock(start)
	cfg := sqlite.DefaultConfig(filepath.Join(t.TempDir(), "gantry.db"))
	cfg.Now = clk.Now
	db, err := sqlite.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	signer, err := auth.NewSigner([]byte(auth.NewKey()))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: storetest.Rerun(db), fake: fake.New("fake", nil, clk)}
	reg := registry.New(nil, registry.Static(e.fake, "process"))
	e.calls = NewCalls(CallConfig{ProviderTimeout: time.Minute, Concurrency: 2, InstallationID: "inst-1"},
		Deps{Store: e.store, Registry: reg, Signer: signer, Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil))},
		NewObservations(), func() {})
	return e
}

// lostAnswer stores a joined machine whose launch answer never arrived
// (no ProviderID), while its instance runs, tagged with its id.
func (e *env) lostAnswer(fleetState api.FleetState) *api.Machine {
	m := &api.Machine{ID: "c-g-lost", Cluster: "c", Group: "g", InstanceType: "fake.small", Provider: "fake", ProviderKey: "fake", LaunchKey: "lk-1",
		JoinState: api.JoinJoined, FleetState: fleetState, CreatedAt: start, JoinedAt: &start, LastHeartbeat: &start, StateChangedAt: start,
		ReportedInstance: "i-real"}
	if err := e.store.Update(context.Background(), func(tx store.Tx) error { return tx.CreateMachine(m) }); err != nil {
		e.t.Fatal(err)
	}
	e.fake.Add(provisioner.Instance{ID: "i-real", State: provisioner.StateRunning, LaunchedAt: start, Tags: map[string]string{
		provisioner.TagManagedBy: provisioner.ManagedByValue, provisioner.TagInstallation: "inst-1", provisioner.TagMachine: m.ID}})
	return m
}

func (e *env) state(id string) provisioner.State {
	for _, inst := range e.fake.Instances() {
		if inst.ID == id {
			return inst.State
		}
	}
	return ""
}

func (e *env) machine(id string) *api.Machine {
	var m *api.Machine
	err := e.store.View(context.Background(), func(tx store.Tx) error {
		var err error
		m, err = tx.GetMachine(id)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// fenceOutcomes are the outcomes the fences left for the next pass.
func (e *env) fenceOutcomes() []decide.Outcome {
	var out []decide.Outcome
	err := e.store.View(context.Background(), func(tx store.Tx) error {
		entries, err := tx.ListMemory()
		if err != nil {
			return err
		}
		mem, err := decide.DecodeMemory(entries)
		for _, o := range mem.Outcomes {
			if o.Call == decide.CallFence {
				out = append(out, o)
			}
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// A fence of a machine whose instance id is unknown finds the instance by
// its tags and stops it; it is never confirmed without a provider's
// answer.
func TestFenceFindsAnUnknownInstanceByItsTags(t *testing.T) {
	e := newEnv(t)
	m := e.lostAnswer(api.FleetActive)

	e.fake.SetNextError(fake.OpList, provisioner.Errorf(provisioner.KindTransport, "list", "connection reset"))
	e.calls.Fence(decide.Fence{Machine: m.ID, Group: "pg"}, "fake")
	e.calls.Wait()
	if got := e.fenceOutcomes(); len(got) != 1 || got[0].Error == "" {
		t.Fatalf("a fence the provider never answered: outcomes %+v, want one failure", got)
	}
	if e.state("i-real") != provisioner.StateRunning {
		t.Fatal("the instance changed without a call")
	}

	e.calls.Fence(decide.Fence{Machine: m.ID, Group: "pg"}, "fake")
	e.calls.Wait()
	if s := e.state("i-real"); s != provisioner.StateTerminated {
		t.Fatalf("the instance found by its tags is %s, want terminated", s)
	}
	confirmed := 0
	for _, o := range e.fenceOutcomes() {
		if o.Error == "" {
			confirmed++
		}
	}
	if confirmed != 1 {
		t.Fatalf("%d confirmed fences, want 1", confirmed)
	}
	if got := e.machine(m.ID); got.ProviderID != "i-real" {
		t.Fatalf("the instance found was not recorded: providerId %q", got.ProviderID)
	}
}

// Terminating such a machine terminates its instance, found by its tags,
// before the machine is recorded terminated; nothing is leaked.
func TestTerminateFindsAnUnknownInstanceByItsTags(t *testing.T) {
	e := newEnv(t)
	m := e.lostAnswer(api.FleetTerminating)
	e.fake.SetNextError(fake.OpList, provisioner.Errorf(provisioner.KindTransport, "list", "connection reset"))
	e.calls.Terminate(m.ID, "fake", "")
	e.calls.Wait()
	if got := e.machine(m.ID); got.FleetState != api.FleetTerminating {
		t.Fatalf("machine %s without a provider's answer, want still terminating", got.FleetState)
	}
	e.calls.Terminate(m.ID, "fake", "")
	e.calls.Wait()
	if s := e.state("i-real"); s != provisioner.StateTerminated {
		t.Fatalf("the instance is %s: leaked", s)
	}
	if got := e.machine(m.ID); got.FleetState != api.FleetTerminated {
		t.Fatalf("machine %s, want terminated", got.FleetState)
	}
	var found bool
	err := e.store.View(context.Background(), func(tx store.Tx) error {
		events, err := tx.ListEvents(store.EventFilter{ObjectKind: "Machine", ObjectName: m.ID})
		for _, ev := range events {
			found = found || (ev.Reason == "Terminated" && strings.Contains(ev.Message, "i-real"))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatal("no Terminated event naming the instance")
	}
}
