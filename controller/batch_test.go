package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
)

const fiveReplicas = `kind: Service
metadata: {name: web}
spec:
  cluster: c
  command: ["sleep", "1000"]
  replicas: 5
  resources: {cpu: 100m, memory: 64Mi}
`

// failingPlacement fails, once, the transaction that writes the replica
// of index failAt, as a lost connection or a conflict past its retries
// would.
type failingPlacement struct {
	store.Store
	failAt int
	failed bool
}

var errLostConnection = errors.New("connection lost")

func (f *failingPlacement) Update(ctx context.Context, fn func(store.Tx) error) error {
	return f.Store.Update(ctx, func(tx store.Tx) error {
		return fn(&failingTx{Tx: tx, store: f})
	})
}

type failingTx struct {
	store.Tx
	store *failingPlacement
}

func (t *failingTx) PutReplica(r *api.Replica) error {
	if r.Index == t.store.failAt && !t.store.failed {
		t.store.failed = true
		return fmt.Errorf("put replica %s: %w", r.ID, errLostConnection)
	}
	return t.Tx.PutReplica(r)
}

// A pass makes and places its replicas PlacementBatch at a time, each
// batch a transaction of its own: a batch that fails leaves those before
// it made and placed, and the next pass makes and places the rest, none
// twice.
func TestReplicasAreMadeAndPlacedInBatches(t *testing.T) {
	e := newEnv(t)
	e.apply(twoMachines)
	e.pass()
	e.join()
	e.cfg.PlacementBatch = 2
	failing := &failingPlacement{Store: e.store, failAt: 2}
	e.store = failing
	e.restart()
	e.apply(fiveReplicas)

	if _, err := e.ctrl.pass(context.Background()); !errors.Is(err, errLostConnection) {
		t.Fatalf("pass: %v, want the second batch's failure", err)
	}
	e.ctrl.Wait()
	if got := e.placedReplicas(); len(got) != 2 {
		t.Fatalf("after the second batch failed: %d replicas placed (%v), want the first batch's 2", len(got), got)
	}

	e.pass()
	got := e.placedReplicas()
	indexes := map[int]bool{}
	for _, r := range got {
		indexes[r.Index] = true
	}
	if len(got) != 5 || len(indexes) != 5 {
		t.Fatalf("after the next pass: %d replicas placed, indexes %v; want 5, each once", len(got), indexes)
	}
	created := 0
	for _, r := range got {
		for _, ev := range e.events("Replica", r.ID) {
			if ev.Reason == "Created" {
				created++
			}
		}
	}
	if created != 5 {
		t.Fatalf("%d Created events for 5 replicas", created)
	}
}

// placedReplicas are the replicas that have a machine.
func (e *env) placedReplicas() []*api.Replica {
	var all []*api.Replica
	e.view(func(tx store.Tx) (err error) { all, err = tx.ListReplicas(store.ReplicaFilter{}); return })
	var out []*api.Replica
	for _, r := range all {
		if r.Machine != "" {
			out = append(out, r)
		}
	}
	return out
}

// readsCounting counts the replicas and machines its transactions read
// one by one (countingTx).
type readsCounting struct {
	store.Store
	reads int
}

func (s *readsCounting) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Update(ctx, func(tx store.Tx) error {
		counted := &countingTx{Tx: tx}
		defer func() { s.reads += counted.reads }()
		return fn(counted)
	})
}

// The act step writes a waiting replica's reason when it changed, and
// reads none of the replicas that say so already: a fleet's launch has
// tens of thousands waiting, told the same every pass, each read in its
// own batch of the act's transactions (defect: every one, every pass).
func TestUnchangedPendingReasonsAreNotRead(t *testing.T) {
	e := newEnv(t)
	counting := &readsCounting{Store: e.store}
	e.store = counting
	e.cfg.FullPassInterval = 0 // every pass decides, the last one too
	e.restart()
	e.apply(twoMachines)
	e.apply(fiveReplicas)
	for i := 0; i < 2; i++ { // launches, then the machines on their way named
		e.pass()
		e.clock.Step(time.Second)
	}
	plan := e.pass()
	var replicas []*api.Replica
	e.view(func(tx store.Tx) (err error) { replicas, err = tx.ListReplicas(store.ReplicaFilter{}); return })
	for _, r := range replicas {
		if why := plan.Pending[r.ID]; r.Machine != "" || why == "" || r.Reason != why {
			t.Fatalf("replica %s on %q says %q, told %q: want it waiting, with the reason written", r.ID, r.Machine, r.Reason, why)
		}
	}
	counting.reads = 0
	e.clock.Step(time.Second)
	if plan := e.pass(); len(plan.Pending) != 5 || len(plan.PendingChanged) != 0 || counting.reads != 0 {
		t.Fatalf("a pass telling 5 waiting replicas what they say: %d to write (%v), %d read one by one; want none",
			len(plan.PendingChanged), plan.PendingChanged, counting.reads)
	}
}
