package server

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/store"
	clocktesting "k8s.io/utils/clock/testing"
)

// countingStore counts the write transactions that touch machines or
// replicas (a heartbeat's), apart from the liveness batches.
type countingStore struct {
	store.Store
	writes, flushes *atomic.Int64
}

func (c countingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	return c.Store.Update(ctx, func(tx store.Tx) error { return fn(countingTx{Tx: tx, c: c}) })
}

type countingTx struct {
	store.Tx
	c countingStore
}

func (t countingTx) PutMachine(m *api.Machine) error {
	t.c.writes.Add(1)
	return t.Tx.PutMachine(m)
}

func (t countingTx) PutLiveness(beats map[string]time.Time) error {
	t.c.flushes.Add(1)
	return t.Tx.PutLiveness(beats)
}

// A heartbeat that changes nothing but the time writes nothing: it is
// kept in memory, visible at once through the API and to the control
// loop, and reaches the store in the next batch. One that changes a
// replica's status is written at once.
func TestQuietHeartbeatsAreBatched(t *testing.T) {
	fake := clocktesting.NewFakeClock(time.Now())
	var writes, flushes atomic.Int64
	ts, ctx := withTestCluster(t, func(c *Config) {
		c.Clock = fake
		c.HeartbeatFlushInterval = time.Second
		c.WrapStore = func(s store.Store) store.Store { return countingStore{Store: s, writes: &writes, flushes: &flushes} }
	})
	credential := ts.joinManual(t, "dev", "m1")
	agent := client.New(ts.URL(), credential, ts.http)
	if _, err := agent.Heartbeat(ctx, "m1", api.HeartbeatRequest{}); err != nil {
		t.Fatal(err)
	}
	before := writes.Load()
	fake.Step(5 * time.Second)
	beatAt := fake.Now()
	for range 5 {
		if _, err := agent.Heartbeat(ctx, "m1", api.HeartbeatRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := writes.Load() - before; got != 0 {
		t.Fatalf("quiet heartbeats wrote the machine %d times", got)
	}
	m, err := ts.admin.GetMachine(ctx, "m1")
	if err != nil || m.LastHeartbeat == nil || m.LastHeartbeat.Before(beatAt) {
		t.Fatalf("the API must show the heartbeat kept in memory: %+v %v", m.LastHeartbeat, err)
	}
	// The 5 s step above fired a flush that may still be writing an
	// older batch: each try steps to the next tick until one carries it.
	waitFor(t, 5*time.Second, "a batch flush carrying the quiet heartbeat", func() bool {
		fake.Step(time.Second)
		var stored *time.Time
		if err := ts.store.View(ctx, func(tx store.Tx) error {
			m, err := tx.GetMachine("m1")
			if err == nil {
				stored = m.LastHeartbeat
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return stored != nil && !stored.Before(beatAt)
	})
	if _, err := agent.Heartbeat(ctx, "m1", api.HeartbeatRequest{Inventory: &api.Inventory{Capacity: api.Resources{MilliCPU: 1000, MemoryBytes: 1 << 30}}}); err != nil {
		t.Fatal(err)
	}
	if writes.Load() == before {
		t.Fatal("a heartbeat with an inventory must be written at once")
	}
}

// An agent of a launched machine cannot claim more than its instance
// type offers, and its machine moving zone is an event.
func TestInventoryIsCappedByTheInstanceType(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	now := time.Now().UTC()
	// An external machine: no pass retires it for being unknown to the
	// local provider while the test runs.
	m := &api.Machine{ID: "m1", Cluster: "dev", Group: "general", InstanceType: "local.small", Provider: "external", ProviderKey: "external",
		ProviderID: "external-1", Zone: "local", LaunchKey: "lk-m1", JoinState: api.JoinBooting, FleetState: api.FleetReady, CreatedAt: now, StateChangedAt: now}
	var offered api.Resources
	if err := ts.store.Update(ctx, func(tx store.Tx) error {
		var err error
		it, err := ts.instanceType(tx, m)
		if err != nil || it == nil {
			return fmt.Errorf("instance type of m1: %v", err)
		}
		offered = it.Resources()
		return tx.CreateMachine(m)
	}); err != nil {
		t.Fatal(err)
	}
	if offered.MilliCPU == 0 {
		t.Fatal("local.small has no catalog entry")
	}
	token, err := ts.signer.Mint(auth.JoinClaims{Cluster: "dev", Group: "general", MachineID: "m1", ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.admin.WithToken("").Join(ctx, api.JoinRequest{Token: token, Cluster: "dev", MachineID: "m1",
		Inventory: api.Inventory{Capacity: api.Resources{MilliCPU: 1_000_000, MemoryBytes: offered.MemoryBytes}, Runtimes: []string{"process"}, Zone: "elsewhere"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ts.admin.GetMachine(ctx, resp.MachineID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Capacity.MilliCPU != offered.MilliCPU {
		t.Fatalf("capacity %d mCPU kept, want the type's %d", got.Capacity.MilliCPU, offered.MilliCPU)
	}
	events, err := ts.admin.ListEvents(ctx, client.EventQuery{Kind: "Machine", Name: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{}
	for _, e := range events {
		reasons[e.Reason] = true
	}
	if !reasons["CapacityCapped"] || !reasons["PlacementChanged"] {
		t.Fatalf("events %v, want CapacityCapped and PlacementChanged", reasons)
	}
}

// Every mutating call leaves an audit event: who, what, when.
func TestMutatingCallsAreAudited(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	ts.joinManual(t, "dev", "m1")
	if _, err := ts.admin.Plan(ctx, []byte(testCluster)); err != nil {
		t.Fatal(err)
	}
	events, err := ts.admin.ListEvents(ctx, client.EventQuery{Kind: "Audit"})
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	for _, e := range events {
		calls = append(calls, e.Message)
		if e.Time.IsZero() {
			t.Errorf("audit event without a time: %+v", e)
		}
	}
	want := []string{"admin POST /v1/apply → 200", "admin POST /v1/join-tokens → 201", "anonymous POST /v1/join → 200"}
	if len(calls) != len(want) {
		t.Fatalf("audit trail %q, want %q (a plan changes nothing)", calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Fatalf("audit trail %q, want %q", calls, want)
		}
	}
}

// A heartbeat applied late (its server was paused, or slow) must not undo
// a newer one another server applied: an older sequence is stale.
func TestStaleHeartbeatChangesNothing(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	credential := ts.joinManual(t, "dev", "m1")
	// A replica of a real service: one of no service is the control
	// loop's to delete, whatever its heartbeats say.
	r := applyWebOnM1(t, ts)
	agent := client.New(ts.URL(), credential, ts.http)
	report := func(seq int64, state api.ReplicaState) {
		t.Helper()
		st := api.ReplicaStatus{ReplicaID: "web-0", Incarnation: r.Incarnation, SpecHash: r.SpecHash, State: state, Health: api.HealthHealthy}
		if _, err := agent.Heartbeat(ctx, "m1", api.HeartbeatRequest{Replicas: []api.ReplicaStatus{st}, Sequence: seq}); err != nil {
			t.Fatal(err)
		}
	}
	report(200, api.ReplicaRunning)
	report(100, api.ReplicaCrashed) // sent before, applied after
	got, err := ts.admin.GetReplica(ctx, "web-0")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != api.ReplicaRunning {
		t.Fatalf("a stale heartbeat set the replica %s, want it still running", got.State)
	}
	report(300, api.ReplicaCrashed)
	if got, err := ts.admin.GetReplica(ctx, "web-0"); err != nil || got.State != api.ReplicaCrashed {
		t.Fatalf("a newer heartbeat was not applied: %+v %v", got, err)
	}
}

// readCountingStore counts read transactions.
type readCountingStore struct {
	store.Store
	reads *atomic.Int64
}

func (c readCountingStore) View(ctx context.Context, fn func(store.Tx) error) error {
	c.reads.Add(1)
	return c.Store.View(ctx, fn)
}

// A quiet heartbeat is answered from the server's view of the store,
// with the assignments the store would give, and without a read
// transaction; a write the server made is in the next answer (the view
// catches up with every commit it heard of before answering).
func TestQuietHeartbeatIsAnsweredFromTheView(t *testing.T) {
	var reads atomic.Int64
	ts, ctx := withTestCluster(t, func(c *Config) {
		c.WrapStore = func(s store.Store) store.Store { return readCountingStore{Store: s, reads: &reads} }
	})
	credential := ts.joinManual(t, "dev", "m1")
	r := applyWebOnM1(t, ts)
	agent := client.New(ts.URL(), credential, ts.http)
	running := api.HeartbeatRequest{Replicas: []api.ReplicaStatus{{ReplicaID: r.ID, Incarnation: r.Incarnation, SpecHash: r.SpecHash,
		State: api.ReplicaRunning, Health: api.HealthHealthy}}}
	if _, err := agent.Heartbeat(ctx, "m1", running); err != nil { // changes the replica: written
		t.Fatal(err)
	}
	fromStore, err := ts.admin.Assignments(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	viewBeats := func() float64 { return testutil.ToFloat64(ts.metrics.Heartbeats.WithLabelValues("view")) }
	var resp *api.HeartbeatResponse
	waitFor(t, 10*time.Second, "a heartbeat answered from the view", func() bool {
		before := viewBeats()
		resp, err = agent.Heartbeat(ctx, "m1", running)
		return err == nil && viewBeats() == before+1
	})
	if got, want := assignmentsJSON(t, resp.Assignments), assignmentsJSON(t, fromStore); got != want {
		t.Fatalf("the view's assignments\n%s\nthe store's\n%s", got, want)
	}
	readsBefore := reads.Load()
	for range 20 {
		if _, err := agent.Heartbeat(ctx, "m1", running); err != nil {
			t.Fatal(err)
		}
	}
	// Other goroutines (the control loop, the names) read too; twenty
	// heartbeats answered from the store would read twenty times.
	if got := reads.Load() - readsBefore; got >= 20 {
		t.Fatalf("20 quiet heartbeats made %d read transactions", got)
	}
	if err := ts.store.Update(ctx, func(tx store.Tx) error {
		second, err := tx.GetReplica(r.ID)
		if err != nil {
			return err
		}
		second.ID, second.Index, second.State = "web-1", 1, api.ReplicaPending
		return tx.PutReplica(second)
	}); err != nil {
		t.Fatal(err)
	}
	before := viewBeats()
	resp, err = agent.Heartbeat(ctx, "m1", running)
	if err != nil || len(resp.Assignments) != 2 || viewBeats() != before+1 {
		t.Fatalf("right after a write placed a second replica on it, the view told the machine %d assignment(s) (%v, view answers %v → %v)",
			len(resp.Assignments), err, before, viewBeats())
	}
}

func assignmentsJSON(t *testing.T, as []api.Assignment) string {
	t.Helper()
	data, err := json.Marshal(as)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// A machine whose heartbeat reached the server is alive even when its
// news could not be written (the store failed it, or lost every race
// under load): its liveness is kept, the agent sends the news again, and
// the control loop does not find it unreachable meanwhile.
func TestHeartbeatWhoseNewsFailedStillCountsAsLive(t *testing.T) {
	fake := clocktesting.NewFakeClock(time.Now())
	var failing atomic.Bool
	ts, ctx := withTestCluster(t, func(c *Config) {
		c.Clock = fake
		c.WrapStore = func(s store.Store) store.Store { return failingStore{Store: s, failing: &failing} }
	})
	credential := ts.joinManual(t, "dev", "m1")
	agent := client.New(ts.URL(), credential, ts.http)
	if _, err := agent.Heartbeat(ctx, "m1", api.HeartbeatRequest{}); err != nil {
		t.Fatal(err)
	}
	fake.Step(10 * time.Second)
	beatAt := fake.Now()
	failing.Store(true)
	news := api.HeartbeatRequest{Inventory: &api.Inventory{Capacity: api.Resources{MilliCPU: 1000, MemoryBytes: 1 << 30}}}
	if _, err := agent.Heartbeat(ctx, "m1", news); !client.IsStatus(err, 503) {
		t.Fatalf("a heartbeat with news on a failing store: %v, want 503", err)
	}
	m, err := ts.admin.GetMachine(ctx, "m1")
	if err != nil || m.LastHeartbeat == nil || m.LastHeartbeat.Before(beatAt) {
		t.Fatalf("last heartbeat %v (%v), want at least %v: the machine reached the server", m.LastHeartbeat, err, beatAt)
	}
}
