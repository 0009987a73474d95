package view_test

import (
	"context"
	"testing"
	"unsafe"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/sqlite/sqlitetest"
	"github.com/gantry-dev/gantry/store/view"
)

// Replicas read from the store, in the first load and in the changes
// after it, share one copy of the strings they repeat (their service,
// cluster, revision and machine), and so does the machine they run on.
func TestViewKeepsOneCopyOfRepeatedStrings(t *testing.T) {
	ctx := context.Background()
	st := sqlitetest.Open(t)
	put := func(ids ...string) {
		t.Helper()
		if err := st.Update(ctx, func(tx store.Tx) error {
			for _, id := range ids {
				if err := tx.PutReplica(&api.Replica{ID: id, Service: "web", Cluster: "c", SpecHash: "abc123", Machine: "m-1"}); err != nil {
					return err
				}
			}
			return tx.PutMachine(&api.Machine{ID: "m-1", Cluster: "c", JoinState: api.JoinJoined, FleetState: api.FleetReady})
		}); err != nil {
			t.Fatal(err)
		}
	}
	put("web-0", "web-1")
	v := view.New(0, 0)
	var snap view.Snapshot
	sync := func() {
		t.Helper()
		if err := st.View(ctx, func(tx store.Tx) (err error) { snap, err = v.Sync(tx); return err }); err != nil {
			t.Fatal(err)
		}
	}
	sync()
	put("web-2")
	sync()
	replicas := snap.Replicas.AppendTo(nil)
	if len(replicas) != 3 || len(snap.Machines) != 1 {
		t.Fatalf("view holds %d replicas and %d machines, want 3 and 1", len(replicas), len(snap.Machines))
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	first := replicas[0]
	for _, r := range replicas[1:] {
		if !same(r.Service, first.Service) || !same(r.Cluster, first.Cluster) || !same(r.SpecHash, first.SpecHash) || !same(r.Machine, first.Machine) {
			t.Fatalf("replica %s holds its own copies of the strings replica %s has", r.ID, first.ID)
		}
	}
	if !same(snap.Machines[0].ID, first.Machine) {
		t.Fatal("the machine's id and its replicas' machine are two copies")
	}
}
