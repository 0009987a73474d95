package server

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
)

// replicaReadsStore counts the replica reads (lists and counts) of read
// transactions whose filter counted selects.
type replicaReadsStore struct {
	store.Store
	reads   *atomic.Int64
	counted func(store.ReplicaFilter) bool
}

func (c replicaReadsStore) View(ctx context.Context, fn func(store.Tx) error) error {
	return c.Store.View(ctx, func(tx store.Tx) error { return fn(replicaReadsTx{Tx: tx, s: c}) })
}

type replicaReadsTx struct {
	store.Tx
	s replicaReadsStore
}

func (t replicaReadsTx) ListReplicas(f store.ReplicaFilter) ([]*api.Replica, error) {
	if t.s.counted(f) {
		t.s.reads.Add(1)
	}
	return t.Tx.ListReplicas(f)
}

func (t replicaReadsTx) CountReplicas(f store.ReplicaFilter) (int, error) {
	if t.s.counted(f) {
		t.s.reads.Add(1)
	}
	return t.Tx.CountReplicas(f)
}

// wholeList: a filter that selects every replica of the store.
func wholeList(f store.ReplicaFilter) bool {
	return f.Service == "" && f.Machine == "" && f.Cluster == ""
}

// A machine's allocation (the requests of the replicas on it) comes from
// the server's view: listing or reading machines does not read every
// replica of the store, which at 500,000 replicas it did for each page.
func TestMachinesAllocationIsReadFromTheView(t *testing.T) {
	var lists atomic.Int64
	ts, ctx := withTestCluster(t, func(c *Config) {
		c.WrapStore = func(s store.Store) store.Store { return replicaReadsStore{Store: s, reads: &lists, counted: wholeList} }
	})
	ts.joinManual(t, "dev", "m1")
	web := applyWebOnM1(t, ts)
	before := lists.Load()
	for range 5 {
		machines, err := ts.admin.ListMachines(ctx, "dev")
		if err != nil || len(machines) != 1 {
			t.Fatalf("machines: %v %v", machines, err)
		}
		if machines[0].Allocated != web.Requests {
			t.Fatalf("m1 allocated %+v in the list, want web-0's requests %+v", machines[0].Allocated, web.Requests)
		}
		m, err := ts.admin.GetMachine(ctx, "m1")
		if err != nil {
			t.Fatal(err)
		}
		if m.Allocated != web.Requests || m.Allocatable.MilliCPU == 0 {
			t.Fatalf("m1 allocated %+v of %+v, want web-0's requests %+v", m.Allocated, m.Allocatable, web.Requests)
		}
	}
	// Other readers (the view's first load) may list every replica once;
	// ten reads of machines did ten times before.
	if got := lists.Load() - before; got >= 10 {
		t.Fatalf("ten reads of machines listed every replica %d times", got)
	}
}
