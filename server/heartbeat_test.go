package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
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
	ts := startServer(t, func(c *Config) {
		c.Clock = fake
		c.HeartbeatFlushInterval = time.Second
		c.WrapStore = func(s store.Store) store.Store { return countingStore{Store: s, writes: &writes, flushes: &flushes} }
	})
	ctx := context.Background()
	if _, err := ts.admin.Apply(ctx, []byte(testCluster)); err != nil {
		t.Fatal(err)
	}
	credential := ts.joinManual(t, "dev", "m1")
	agent := client.New(ts.URL(), credential, nil)
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
	flushed := flushes.Load()
	fake.Step(time.Second)
	waitFor(t, 5*time.Second, "a batch flush", func() bool { return flushes.Load() > flushed })
	if err := ts.store.View(ctx, func(tx store.Tx) error {
		m, err := tx.GetMachine("m1")
		if err == nil && (m.LastHeartbeat == nil || m.LastHeartbeat.Before(beatAt)) {
			t.Errorf("the store's heartbeat after the flush: %v, want %v", m.LastHeartbeat, beatAt)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Heartbeat(ctx, "m1", api.HeartbeatRequest{Inventory: &api.Inventory{Capacity: api.Resources{MilliCPU: 1000, MemoryBytes: 1 << 30}}}); err != nil {
		t.Fatal(err)
	}
	if writes.Load() == before {
		t.Fatal("a heartbeat with an inventory must be written at once")
	}
}
