package controller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
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
	db := machinesOnPostgres(b, machines, 0)
	round := 0
	for b.Loop() {
		round++
		plan := placing(round, replicas, machines)
		if err := db.Update(context.Background(), func(tx store.Tx) error { return actPlacing(tx, plan) }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(replicas*float64(b.N)/b.Elapsed().Seconds(), "replicas/s")
}

// BenchmarkActPlacesUnderHeartbeats is the same act step while the
// machines it places on heartbeat with news (each a transaction that
// reads its machine and its replicas, changes one and writes the
// machine), as they do while a fleet grows: "attempts/op" counts how
// many times the act's transaction ran to commit once.
//
//	GANTRY_TEST_POSTGRES=… go test ./controller -run '^$' -bench ActPlacesUnderHeartbeats -benchtime 3x
func BenchmarkActPlacesUnderHeartbeats(b *testing.B) {
	const replicas, machines, heartbeaters = 10000, 2000, 6
	db := machinesOnPostgres(b, machines, 5)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var beats, failed atomic.Int64
	var wg sync.WaitGroup
	for h := range heartbeaters {
		wg.Go(func() {
			for n := h; ctx.Err() == nil; n += heartbeaters {
				id := fmt.Sprintf("m-%d", n%machines)
				err := db.Update(ctx, func(tx store.Tx) error {
					m, err := tx.GetMachine(id)
					if err != nil {
						return err
					}
					on, err := tx.ListReplicas(store.ReplicaFilter{Machine: id})
					if err != nil {
						return err
					}
					if len(on) > 0 {
						r := *on[n%len(on)]
						r.Reason = fmt.Sprintf("beat %d", n)
						if err := tx.PutReplica(&r); err != nil {
							return err
						}
					}
					if _, err := tx.ListReplicas(store.ReplicaFilter{PreviousMachine: id}); err != nil {
						return err
					}
					m.ReportSequence++
					return tx.PutMachine(m)
				})
				switch {
				case err == nil:
					beats.Add(1)
				case ctx.Err() == nil:
					failed.Add(1)
				}
			}
		})
	}
	round, attempts := 0, 0
	for b.Loop() {
		round++
		plan := placing(round, replicas, machines)
		if err := db.Update(context.Background(), func(tx store.Tx) error {
			attempts++
			return actPlacing(tx, plan)
		}); err != nil {
			b.Fatal(err)
		}
	}
	stop()
	wg.Wait()
	b.ReportMetric(float64(attempts)/float64(b.N), "attempts/op")
	b.ReportMetric(float64(beats.Load())/b.Elapsed().Seconds(), "beats/s")
	b.ReportMetric(float64(failed.Load()), "beats-failed")
}

// placing is a plan that makes n replicas (ids of the round) and places
// them over machines m-0 … m-(machines-1).
func placing(round, n, machines int) decide.Plan {
	var plan decide.Plan
	for i := range n {
		r := &api.Replica{ID: fmt.Sprintf("r%d-%d", round, i), Index: i, Service: fmt.Sprintf("s-%d", i/100), Cluster: "dev", State: api.ReplicaPending}
		plan.CreateReplicas = append(plan.CreateReplicas, r)
		plan.Assignments = append(plan.Assignments, decide.Assignment{Replica: r.ID, Placement: replica.Placement{Machine: fmt.Sprintf("m-%d", i%machines)}})
	}
	return plan
}

// actPlacing is the act step's writes of such a plan, in tx.
func actPlacing(tx store.Tx, plan decide.Plan) error {
	w := &writer{tx: newReadBack(tx), now: time.Unix(1_800_000_000, 0)}
	if err := w.replicas(plan); err != nil {
		return err
	}
	return w.placements(plan)
}

// machinesOnPostgres is a PostgreSQL store of its own holding machines
// m-0 … m-(machines-1), each with running replicas already on it.
func machinesOnPostgres(b *testing.B, machines, running int) *postgres.Store {
	db, err := postgres.Open(context.Background(), postgres.DefaultConfig(pgtest.URL(b)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	err = db.Update(context.Background(), func(tx store.Tx) error {
		for i := range machines {
			id := fmt.Sprintf("m-%d", i)
			if err := tx.CreateMachine(&api.Machine{ID: id, Cluster: "dev", FleetState: api.FleetReady, JoinState: api.JoinJoined}); err != nil {
				return err
			}
			for j := range running {
				r := &api.Replica{ID: fmt.Sprintf("old-%d-%d", i, j), Service: "old", Cluster: "dev", Machine: id, State: api.ReplicaStarting}
				if err := tx.PutReplica(r); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return db
}
