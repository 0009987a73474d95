package heartbeat

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/sqlite/sqlitetest"
	"k8s.io/utils/clock"
)

type countedFlushes struct{ machines []int }

func (c *countedFlushes) FlushTook(float64)              {}
func (c *countedFlushes) HeartbeatsFlushed(machines int) { c.machines = append(c.machines, machines) }

func openStore(t *testing.T) store.Store { return sqlitetest.Open(t) }

// A machine's newest heartbeat is kept until flushed; reads of machines
// see it meanwhile; a flush that fails keeps the batch for the next, and
// one that succeeds writes each machine's newest heartbeat once.
func TestBeatsKeepTheNewestUntilAFlushSucceeds(t *testing.T) {
	ctx := context.Background()
	broken := openStore(t)
	metrics := &countedFlushes{}
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	b := NewBeats(broken, time.Hour, clock.RealClock{}, metrics, slog.New(slog.DiscardHandler))
	b.Beat("m1", t0.Add(time.Second))
	b.Beat("m1", t0) // older news: kept out
	b.Beat("m2", t0)
	read := []*api.Machine{{ID: "m1"}, {ID: "m2", LastHeartbeat: new(t0.Add(time.Minute))}, {ID: "m3"}}
	seen := slices.Clone(read)
	b.Overlay(seen)
	if got := seen[0].LastHeartbeat; got == nil || !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("m1 read with heartbeat %v, want its newest unflushed one", got)
	}
	if read[0].LastHeartbeat != nil {
		t.Fatal("the overlay changed the machine it was handed (shared by a view's readers), not a copy")
	}
	if got := seen[1].LastHeartbeat; !got.Equal(t0.Add(time.Minute)) || seen[2].LastHeartbeat != nil {
		t.Fatalf("a stored newer heartbeat was replaced (%v), or a machine with none got one (%v)", got, seen[2].LastHeartbeat)
	}
	broken.Close() // the next flush fails
	b.Flush(ctx)
	if len(metrics.machines) != 0 {
		t.Fatalf("a failed flush counted %v", metrics.machines)
	}
	good := openStore(t)
	b.store = good
	b.Flush(ctx)
	var liveness map[string]time.Time
	if err := good.View(ctx, func(tx store.Tx) error {
		var err error
		liveness, err = tx.ListLiveness()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(liveness) != 2 || !liveness["m1"].Equal(t0.Add(time.Second)) || !liveness["m2"].Equal(t0) {
		t.Fatalf("flushed %v, want m1's newest and m2's after the failed flush gave them back", liveness)
	}
	if len(metrics.machines) != 1 || metrics.machines[0] != 2 {
		t.Fatalf("flushes counted %v, want one of 2 machines", metrics.machines)
	}
	b.Flush(ctx) // nothing pending: no write
	if len(metrics.machines) != 1 {
		t.Fatalf("an empty batch was flushed: %v", metrics.machines)
	}
}

// LayOn lays into heartbeats aligned with machines sorted by id what
// Overlay lays on copies of them: random fleets and batches, heartbeats
// older and newer than the machines' own and than those already laid,
// and ids the list does not hold.
func TestLayOnLaysWhatOverlayLays(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 31))
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for round := range 200 {
		b := NewBeats(nil, time.Hour, clock.RealClock{}, nil, slog.New(slog.DiscardHandler))
		var machines []*api.Machine
		var laid []int64 // what a view recorded, when it recorded any
		for i := range rng.IntN(60) {
			if rng.IntN(3) == 0 {
				continue // an id the batch may name that the list lacks
			}
			m := &api.Machine{ID: fmt.Sprintf("m%03d", i)}
			if rng.IntN(2) == 0 {
				m.LastHeartbeat = new(t0.Add(time.Duration(rng.IntN(10)) * time.Second))
			}
			machines = append(machines, m)
		}
		if rng.IntN(2) == 0 {
			laid = make([]int64, len(machines))
			for i := range laid {
				if rng.IntN(3) == 0 {
					laid[i] = t0.Add(time.Duration(rng.IntN(10)) * time.Second).UnixNano()
				}
			}
		}
		for range rng.IntN(40) {
			b.Beat(fmt.Sprintf("m%03d", rng.IntN(70)), t0.Add(time.Duration(rng.IntN(10))*time.Second))
		}
		want := slices.Clone(machines)
		for i, at := range laid {
			if at != 0 {
				want[i] = want[i].WithHeartbeat(time.Unix(0, at))
			}
		}
		b.Overlay(want)
		got := b.LayOn(machines, slices.Clone(laid))
		for i, m := range machines {
			heard := m.LastHeartbeat
			if i < len(got) && got[i] != 0 && (heard == nil || time.Unix(0, got[i]).After(*heard)) {
				heard = new(time.Unix(0, got[i]))
			}
			if w := want[i].LastHeartbeat; (w == nil) != (heard == nil) || w != nil && !w.Equal(*heard) {
				t.Fatalf("round %d, %s: LayOn laid %v, Overlay %v", round, m.ID, heard, w)
			}
		}
	}
}

// BenchmarkOverlay lays a second's unflushed heartbeats (1,667: a third
// of 5,000) over 50,000 machines, as a leader's pass does: on copies of
// the machines (each-machine), or into heartbeats aligned with
// them (aligned).
//
//	go test ./server/heartbeat -run '^$' -bench Overlay -benchmem
func BenchmarkOverlay(b *testing.B) {
	beats := NewBeats(nil, time.Hour, clock.RealClock{}, nil, slog.New(slog.DiscardHandler))
	machines := make([]*api.Machine, 50000)
	for i := range machines {
		machines[i] = &api.Machine{ID: fmt.Sprintf("m%05d", i)}
	}
	for i := 0; i < len(machines); i += 30 {
		beats.Beat(machines[i].ID, time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	}
	list := make([]*api.Machine, len(machines))
	b.Run("each-machine", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			copy(list, machines)
			beats.Overlay(list)
		}
	})
	aligned := make([]int64, len(machines))
	b.Run("aligned", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			clear(aligned)
			beats.LayOn(machines, aligned)
		}
	})
}
