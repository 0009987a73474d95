package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/postgres"
	"github.com/gantry-dev/gantry/store/postgres/pgtest"
)

// BenchmarkActPlacesOnPostgres: the act step's writes for a pass that
// makes and places 10,000 replicas on 100 machines, on PostgreSQL (each
// replica written, recorded, read back, placed and recorded again).
//
//	GANTRY_TEST_POSTGRES=… go test ./controller -run '^$' -bench ActPlacesOnPostgres -benchtime 5x
func BenchmarkActPlacesOnPostgres(b *testing.B) {
	const replicas, machines = 10000, 100
	db, err := postgres.Open(context.Background(), postgres.DefaultConfig(pgtest.URL(b)))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(context.Background(), func(tx store.Tx) error {
		for i := range machines {
			if err := tx.CreateMachine(&api.Machine{ID: fmt.Sprintf("m-%d", i), Cluster: "dev", FleetState: api.FleetReady, JoinState: api.JoinJoined}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	round := 0
	for b.Loop() {
		round++
		var plan decide.Plan
		for i := range replicas {
			r := &api.Replica{ID: fmt.Sprintf("r%d-%d", round, i), Index: i, Service: fmt.Sprintf("s-%d", i/100), Cluster: "dev", State: api.ReplicaPending}
			plan.CreateReplicas = append(plan.CreateReplicas, r)
			plan.Assignments = append(plan.Assignments, decide.Assignment{Replica: r.ID, Placement: replica.Placement{Machine: fmt.Sprintf("m-%d", i%machines)}})
		}
		now := time.Unix(1_800_000_000, 0)
		if err := db.Update(context.Background(), func(tx store.Tx) error {
			w := &writer{tx: newReadBack(tx), now: now}
			if err := w.replicas(plan); err != nil {
				return err
			}
			return w.placements(plan)
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(replicas*float64(b.N)/b.Elapsed().Seconds(), "replicas/s")
}
