package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/sqlite"
)

// A cluster's view, kept from the change feed through random writes
// (and through compaction, which makes it read the cluster again), holds
// what a fresh read of the cluster's replicas and live machines holds.
func TestFleetViewFollowsTheFeed(t *testing.T) {
	for _, retention := range []time.Duration{time.Hour, time.Nanosecond} {
		t.Run(fmt.Sprint("retention=", retention), func(t *testing.T) {
			cfg := sqlite.DefaultConfig(filepath.Join(t.TempDir(), "gantry.db"))
			cfg.ChangeRetention = retention
			db, err := sqlite.Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			rng := rand.New(rand.NewPCG(31, uint64(retention)))
			views := newFleetViews(7)
			for round := range 60 {
				err := db.Update(context.Background(), func(tx store.Tx) error {
					for range 1 + rng.IntN(8) {
						if err := randomFleetWrite(tx, rng); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if err := db.View(context.Background(), func(tx store.Tx) error {
					return compareView(t, tx, views, round)
				}); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func randomFleetWrite(tx store.Tx, rng *rand.Rand) error {
	cluster := []string{"a", "b"}[rng.IntN(2)]
	id := fmt.Sprintf("x%d", rng.IntN(12))
	switch rng.IntN(4) {
	case 0:
		return tx.DeleteReplica(id)
	case 1:
		state := []api.FleetState{api.FleetActive, api.FleetTerminated}[rng.IntN(2)]
		return tx.PutMachine(&api.Machine{ID: "m" + id, Cluster: cluster, FleetState: state, MeshKey: fmt.Sprint(rng.IntN(9))})
	}
	return tx.PutReplica(&api.Replica{ID: id, Service: fmt.Sprintf("s%d", rng.IntN(3)), Cluster: cluster, Machine: fmt.Sprint(rng.IntN(5))})
}

func compareView(t *testing.T, tx store.Tx, views *fleetViews, round int) error {
	t.Helper()
	replicas, machines, err := views.current(tx, "a")
	if err != nil {
		return err
	}
	wantReplicas, err := tx.ListReplicas(store.ReplicaFilter{Cluster: "a"})
	if err != nil {
		return err
	}
	wantMachines, err := tx.ListMachines(store.MachineFilter{Cluster: "a", LiveOnly: true})
	if err != nil {
		return err
	}
	key := func(id string, rv int64) string { return fmt.Sprintf("%s@%d", id, rv) }
	var got, want []string
	for _, r := range replicas {
		got = append(got, key(r.ID, r.ResourceVersion))
	}
	for _, r := range wantReplicas {
		want = append(want, key(r.ID, r.ResourceVersion))
	}
	for _, m := range machines {
		got = append(got, key(m.ID, m.ResourceVersion))
	}
	for _, m := range wantMachines {
		want = append(want, key(m.ID, m.ResourceVersion))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("round %d: view %v, store %v", round, got, want)
	}
	return nil
}
