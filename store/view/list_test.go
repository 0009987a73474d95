package view_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/sqlite/sqlitetest"
	"github.com/gantry-dev/gantry/store/view"
)

// A list of replicas answered from the view is the store's answer to the
// same request: for random fleets, changes after the view loaded, filters,
// keys to list after, offsets, limits and counts.
func TestListReplicasAnswersAsTheStore(t *testing.T) {
	ctx := context.Background()
	st := sqlitetest.Open(t)
	rng := rand.New(rand.NewPCG(31, 7))
	pick := func(prefix string, n int) string { return fmt.Sprintf("%s%d", prefix, rng.IntN(n)) }
	write := func(n int) {
		t.Helper()
		if err := st.Update(ctx, func(tx store.Tx) error {
			for range n {
				r := &api.Replica{ID: pick("r", 400), Service: pick("s", 6), Cluster: pick("c", 3), Machine: pick("m", 20)}
				if rng.IntN(4) == 0 {
					r.PreviousMachine = pick("m", 20)
				}
				if err := tx.PutReplica(r); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	v := view.New(0, 0)
	for round := range 20 {
		write(50 + rng.IntN(150))
		if err := st.View(ctx, func(tx store.Tx) error { _, err := v.Follow(tx); return err }); err != nil {
			t.Fatal(err)
		}
		for range 50 {
			f := store.ReplicaFilter{}
			for field, value := range map[*string]string{&f.Cluster: pick("c", 4), &f.Service: pick("s", 7), &f.Machine: pick("m", 22), &f.PreviousMachine: pick("m", 22)} {
				if rng.IntN(3) == 0 {
					*field = value
				}
			}
			if rng.IntN(2) == 0 {
				f.Limit = 1 + rng.IntN(40)
				f.Offset = rng.IntN(3) * rng.IntN(30)
			}
			if rng.IntN(3) == 0 {
				f.After = []string{pick("s", 7), pick("r", 410)}
			}
			count := rng.IntN(2) == 0
			var want []*api.Replica
			var wantTotal int
			if err := st.View(ctx, func(tx store.Tx) error {
				var err error
				if want, err = tx.ListReplicas(f); err != nil || !count {
					return err
				}
				wantTotal, err = tx.CountReplicas(f)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			got, total, rev, ok := v.ListReplicas(f, count)
			if !ok || rev != v.Revision() {
				t.Fatalf("round %d: loaded %v at revision %d, the view's %d", round, ok, rev, v.Revision())
			}
			if ids(got) != ids(want) || total != wantTotal {
				t.Fatalf("round %d, filter %+v, count %v:\nview  %d of %s\nstore %d of %s", round, f, count, total, ids(got), wantTotal, ids(want))
			}
		}
	}
}

func ids(list []*api.Replica) string {
	out := ""
	for _, r := range list {
		out += r.Service + "/" + r.ID + " "
	}
	return out
}
