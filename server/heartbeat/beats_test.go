package heartbeat

import (
	"context"
	"log/slog"
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
