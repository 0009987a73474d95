package controller

import (
	"context"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/postgres"
	"github.com/gantry-dev/gantry/store/postgres/pgtest"
)

// A machine that heartbeats with news while the act places a replica on
// it must not make the act's transaction run again. The heartbeat reads
// the replicas on the machine (which the act adds to) and writes the
// machine; an act that read the machine back closed the cycle, and
// PostgreSQL failed it. At 50,000 machines, an act placing 10,000
// replicas while their machines report ran out of its 30 retries and
// placed nothing for minutes (BENCHMARKS.md).
func TestActPlacingDoesNotConflictWithTheMachinesHeartbeat(t *testing.T) {
	ctx := context.Background()
	db, err := postgres.Open(ctx, postgres.DefaultConfig(pgtest.URL(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(ctx, func(tx store.Tx) error {
		return tx.CreateMachine(&api.Machine{ID: "m-0", Cluster: "dev", FleetState: api.FleetReady, JoinState: api.JoinJoined})
	}); err != nil {
		t.Fatal(err)
	}
	plan := placing(1, 1, 1)
	heartbeat := func() error { // as server/heartbeat writes one with news
		return db.Update(ctx, func(tx store.Tx) error {
			m, err := tx.GetMachine("m-0")
			if err != nil {
				return err
			}
			if _, err := tx.ListReplicas(store.ReplicaFilter{Machine: "m-0"}); err != nil {
				return err
			}
			m.ReportSequence++
			return tx.PutMachine(m)
		})
	}
	attempts := 0
	err = db.Update(ctx, func(tx store.Tx) error {
		attempts++
		w := &writer{tx: newReadBack(tx), now: time.Unix(1_800_000_000, 0)}
		if err := w.create(plan.CreateReplicas[0]); err != nil {
			return err
		}
		if attempts == 1 { // the machine reports while the act runs
			if err := heartbeat(); err != nil {
				t.Fatalf("heartbeat: %v", err)
			}
		}
		return w.assign(plan.Assignments[0])
	})
	if err != nil {
		t.Fatalf("act: %v", err)
	}
	if attempts != 1 {
		t.Errorf("the act ran %d times: the heartbeat made it fail", attempts)
	}
	err = db.View(ctx, func(tx store.Tx) error {
		got, err := tx.GetReplica(plan.CreateReplicas[0].ID)
		if err == nil && got.Machine != "m-0" {
			t.Errorf("%s is on %q, want m-0", got.ID, got.Machine)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
