package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
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
// replica written, recorded, read back, placed and recorded again), in
// one transaction (batch=all) or PlacementBatch a transaction.
//
//	GANTRY_TEST_POSTGRES=… go test ./controller -run '^$' -bench ActPlacesOnPostgres -benchtime 5x
func BenchmarkActPlacesOnPostgres(b *testing.B) {
	const replicas, machines = 10000, 100
	forEachBatch(b, func(b *testing.B, batch int) {
		db := machinesOnPostgres(b, machines, 0)
		round := 0
		for b.Loop() {
			round++
			if _, err := actPlacing(db, placing(round, replicas, machines), batch); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(replicas*float64(b.N)/b.Elapsed().Seconds(), "replicas/s")
	})
}

// forEachBatch runs bench with the act in one transaction (batch=all)
// and in the default PlacementBatch.
func forEachBatch(b *testing.B, bench func(b *testing.B, batch int)) {
	for _, batch := range []int{0, DefaultConfig().PlacementBatch} {
		name := fmt.Sprintf("batch=%d", batch)
		if batch == 0 {
			name = "batch=all"
		}
		b.Run(name, func(b *testing.B) { bench(b, batch) })
	}
}

// BenchmarkActPlacesUnderHeartbeats is the same act step while the
// machines it places on heartbeat with news (each a transaction that
// reads its machine and its replicas, changes one and writes the
// machine), as they do while a fleet grows: "attempts/op" counts the
// act's transactions run (retries included), "batches/op" those it
// needs without a retry. batch=all commits the step in one transaction,
// as the act did before PlacementBatch.
//
//	GANTRY_TEST_POSTGRES=… go test ./controller -run '^$' -bench ActPlacesUnderHeartbeats -benchtime 3x
func BenchmarkActPlacesUnderHeartbeats(b *testing.B) {
	forEachBatch(b, benchmarkActUnderHeartbeats)
}

func benchmarkActUnderHeartbeats(b *testing.B, batch int) {
	const replicas, machines, heartbeaters = 10000, 2000, 6
	db := machinesOnPostgres(b, machines, 5)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var beats, failed atomic.Int64
	var wg sync.WaitGroup
	for h := range heartbeaters {
		wg.Go(func() {
			for n := h; ctx.Err() == nil; n += heartbeaters {
				switch err := heartbeatWithNews(ctx, db, fmt.Sprintf("m-%d", n%machines), n); {
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
		n, err := actPlacing(db, placing(round, replicas, machines), batch)
		if err != nil {
			b.Fatal(err)
		}
		attempts += n
	}
	stop()
	wg.Wait()
	batches := 1
	if batch > 0 {
		batches = (replicas + batch - 1) / batch
	}
	b.ReportMetric(float64(attempts)/float64(b.N), "attempts/op")
	b.ReportMetric(float64(batches), "batches/op")
	b.ReportMetric(float64(beats.Load())/b.Elapsed().Seconds(), "beats/s")
	b.ReportMetric(float64(failed.Load()), "beats-failed")
}

// heartbeatWithNews writes a heartbeat of machine id as the server
// writes one with news: the machine and its replicas read, one replica
// changed, the machine written.
func heartbeatWithNews(ctx context.Context, db store.Store, id string, n int) error {
	return db.Update(ctx, func(tx store.Tx) error {
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

// actPlacing is the act step's writes of such a plan, batch replicas a
// transaction (0: all in one); it returns the transactions run.
func actPlacing(db store.Store, plan decide.Plan, batch int) (int, error) {
	return placeInBatches(context.Background(), db, placementSteps(plan), batch, time.Unix(1_800_000_000, 0))
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

// BenchmarkActToldWaitingOnPostgres: the act step of a pass that tells
// 10,000 waiting replicas, on PostgreSQL, what they say already (a
// fleet's launch, pass after pass). named=all reads each back to compare,
// as the act did for every pending reason before plans named those to
// write (Plan.PendingChanged); named=changed is the act now: none.
//
//	GANTRY_TEST_POSTGRES=… go test ./controller -run '^$' -bench ActToldWaitingOnPostgres -benchtime 5x
func BenchmarkActToldWaitingOnPostgres(b *testing.B) {
	const waiting, why = 10000, "waiting for machine m-0 to join"
	db := machinesOnPostgres(b, 1, 0)
	plan := decide.Plan{Pending: make(map[string]string, waiting)}
	err := db.Update(context.Background(), func(tx store.Tx) error {
		for i := range waiting {
			r := &api.Replica{ID: fmt.Sprintf("w-%05d", i), Index: i, Service: "w", Cluster: "dev", State: api.ReplicaPending, Reason: why}
			plan.Pending[r.ID] = why
			if err := tx.PutReplica(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	all := slices.Sorted(maps.Keys(plan.Pending))
	for _, named := range []struct {
		name string
		ids  []string
	}{{"named=all", all}, {"named=changed", nil}} {
		b.Run(named.name, func(b *testing.B) {
			told := plan
			told.PendingChanged = named.ids
			for b.Loop() {
				if _, err := actPlacing(db, told, DefaultConfig().PlacementBatch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
