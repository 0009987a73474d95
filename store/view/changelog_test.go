package view_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/sqlite/sqlitetest"
	"github.com/gantry-dev/gantry/store/view"
)

// The view logs the changes it applies: for a replica, the machine it
// was on before. It answers for the revisions it logged, and says it
// does not know once it let them go (a log of four keeps two when full).
func TestViewLogsTheChangesItApplied(t *testing.T) {
	ctx := context.Background()
	st := sqlitetest.Open(t)
	put := func(r *api.Replica) {
		t.Helper()
		if err := st.Update(ctx, func(tx store.Tx) error { return tx.PutReplica(r) }); err != nil {
			t.Fatal(err)
		}
	}
	v := view.New(0, 4)
	follow := func() int64 {
		t.Helper()
		var rev int64
		if err := st.View(ctx, func(tx store.Tx) (err error) { rev, err = v.Follow(tx); return }); err != nil {
			t.Fatal(err)
		}
		return rev
	}
	put(&api.Replica{ID: "web-0", Service: "web", Machine: "m1"})
	loaded := follow()
	put(&api.Replica{ID: "web-0", Service: "web", Machine: "m2"})
	put(&api.Replica{ID: "web-1", Service: "web"})
	now := follow()
	got, ok := v.ChangesSince(loaded, now)
	if !ok || fmt.Sprint(got) != fmt.Sprintf("[{%d Replica web-0 web m1} {%d Replica web-1 web }]", loaded+1, loaded+2) {
		t.Fatalf("changes since the load: %v, %v", got, ok)
	}
	if got, ok := v.ChangesSince(loaded+1, now); !ok || len(got) != 1 || got[0].Name != "web-1" {
		t.Fatalf("changes since the first: %v, %v", got, ok)
	}
	if _, ok := v.ChangesSince(loaded-1, now); ok {
		t.Fatal("the view answered for a revision before its load")
	}
	for i := range 3 {
		put(&api.Replica{ID: fmt.Sprint("web-", 2+i), Service: "web"})
	}
	later := follow()
	if _, ok := v.ChangesSince(loaded, later); ok {
		t.Fatal("the view answered for changes it let go")
	}
	if got, ok := v.ChangesSince(later-2, later); !ok || len(got) != 2 {
		t.Fatalf("the last two changes: %v, %v", got, ok)
	}
}

// The view vouches for the replicas' order only while every id begins
// with its service's name and a dash: a pass searches them by that.
func TestViewVouchesForTheOrderOfServiceIDs(t *testing.T) {
	ctx := context.Background()
	st := sqlitetest.Open(t)
	v := view.New(0, 0)
	inOrder := func(write func(tx store.Tx) error) bool {
		t.Helper()
		var snap view.Snapshot
		if err := st.Update(ctx, write); err != nil {
			t.Fatal(err)
		}
		if err := st.View(ctx, func(tx store.Tx) (err error) { snap, err = v.Sync(tx); return }); err != nil {
			t.Fatal(err)
		}
		return snap.InStoreOrder
	}
	if !inOrder(func(tx store.Tx) error { return tx.PutReplica(&api.Replica{ID: "web-0", Service: "web"}) }) {
		t.Fatal("web-0 of web: not vouched for")
	}
	if inOrder(func(tx store.Tx) error { return tx.PutReplica(&api.Replica{ID: "web", Service: "web"}) }) {
		t.Fatal("an id without its service's name and a dash: vouched for")
	}
	if !inOrder(func(tx store.Tx) error { return tx.DeleteReplica("web") }) {
		t.Fatal("the odd id deleted: not vouched for")
	}
}
