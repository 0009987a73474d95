package postgres

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/postgres/pgtest"
	"github.com/gantry-dev/gantry/store/storetest"
)

// BenchmarkConcurrentFeedWrites is the store's write throughput when many
// writers change objects at once, as heartbeats that change something and
// joins do: each transaction writes one replica, each writer its own (so
// none fails on another's row), and every commit takes the change feed's
// lock to number its change. attempts/commit counts the transactions run
// again after a serialization failure.
func BenchmarkConcurrentFeedWrites(b *testing.B) {
	for _, c := range []struct{ writers, bound int }{{1, 0}, {8, 0}, {32, 0}, {32, 2}, {32, 4}, {32, 8}} {
		writers := c.writers
		b.Run(fmt.Sprintf("writers=%d/bound=%d", writers, c.bound), func(b *testing.B) {
			cfg := DefaultConfig(pgtest.URL(b))
			cfg.MaxConns = writers + 2
			cfg.MaxWriters = c.bound
			s, err := Open(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var next, attempts atomic.Int64
			b.SetParallelism(max(1, writers/2)) // GOMAXPROCS is 2 here
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				id := fmt.Sprintf("r-%d", next.Add(1))
				round := 0
				for pb.Next() {
					round++
					r := &api.Replica{ID: id, Service: "web", Cluster: "dev", Incarnation: fmt.Sprint(round)}
					if err := s.Update(context.Background(), func(tx store.Tx) error {
						attempts.Add(1)
						return tx.PutReplica(r)
					}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			b.ReportMetric(float64(attempts.Load())/float64(b.N), "attempts/commit")
		})
	}
}

// BenchmarkLargeWrite is one transaction that writes 10,000 replicas, as
// a pass that makes 100 services of 100 replicas does.
func BenchmarkLargeWrite(b *testing.B) {
	s, err := Open(context.Background(), DefaultConfig(pgtest.URL(b)))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	round := 0
	for b.Loop() {
		round++
		if err := s.Update(context.Background(), func(tx store.Tx) error {
			for i := range 10000 {
				r := &api.Replica{ID: fmt.Sprintf("r-%d", i), Service: fmt.Sprintf("s-%d", i/100), Cluster: "dev", Incarnation: fmt.Sprint(round)}
				if err := tx.PutReplica(r); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(10000*float64(b.N)/b.Elapsed().Seconds(), "writes/s")
}

// BenchmarkLiveness: a view's read of a second's heartbeats at 50,000
// machines (storetest.BenchLiveness).
//
//	go test ./store/postgres -run '^$' -bench Liveness -benchtime 100x
func BenchmarkLiveness(b *testing.B) {
	storetest.BenchLiveness(b, func(b *testing.B) store.Store {
		s, err := Open(context.Background(), DefaultConfig(pgtest.URL(b)))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	})
}
