package storetest

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/store"
)

// markedRead is what one ScanLiveness delivered.
type markedRead struct {
	beats  map[string]time.Time
	newest int64
}

func scanMarked(t *testing.T, s store.Store, after int64) markedRead {
	t.Helper()
	read := markedRead{beats: map[string]time.Time{}, newest: after}
	must(t, s.View(context.Background(), func(tx store.Tx) error {
		clear(read.beats)
		read.newest = after
		return tx.ScanLiveness(after, func(id string, at time.Time, mark int64) {
			if mark <= after {
				t.Errorf("%s's heartbeat marked %d, read after %d", id, mark, after)
			}
			read.beats[id] = at
			read.newest = max(read.newest, mark)
		})
	}))
	return read
}

// Heartbeats' writes are marked: a read after a write's mark delivers
// only the heartbeats written since, and a heartbeat older than the one
// recorded is no write at all.
func testLivenessMarks(t *testing.T, s store.Store) {
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(beats map[string]time.Time) {
		t.Helper()
		must(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutLiveness(beats) }))
	}
	put(map[string]time.Time{"a": base, "b": base})
	first := scanMarked(t, s, store.AllLiveness)
	if want := map[string]time.Time{"a": base, "b": base}; !maps.Equal(first.beats, want) || first.newest <= 0 {
		t.Fatalf("a whole read: %v marked up to %d, want %v marked above 0", first.beats, first.newest, want)
	}
	put(map[string]time.Time{"b": base.Add(time.Second)})
	second := scanMarked(t, s, first.newest)
	if want := map[string]time.Time{"b": base.Add(time.Second)}; !maps.Equal(second.beats, want) {
		t.Fatalf("read after mark %d: %v, want %v", first.newest, second.beats, want)
	}
	put(map[string]time.Time{"a": base.Add(-time.Second)})
	if third := scanMarked(t, s, second.newest); len(third.beats) != 0 {
		t.Fatalf("an older heartbeat than the recorded one was read as a change: %v", third.beats)
	}
}

// Marks follow commit order, whatever order the writes drew them in:
// a follower that reads, while several servers flush at once, only the
// heartbeats marked after the newest it saw misses none of them.
func testLivenessMarksFollowCommits(t *testing.T, s store.Store) {
	ctx := context.Background()
	const writers, batches = 4, 60
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				// New machines each batch (a missed one stays missed), and
				// the writer's first machine again, later.
				beats := map[string]time.Time{fmt.Sprintf("w%d-0", w): base.Add(time.Duration(b) * time.Second)}
				for i := range 3 {
					beats[fmt.Sprintf("w%d-%d-%d", w, b, i)] = base
				}
				if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutLiveness(beats) }); err != nil {
					t.Errorf("writer %d, batch %d: %v", w, b, err)
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	followed := map[string]time.Time{}
	var mark int64 = store.AllLiveness
	follow := func() {
		read := scanMarked(t, s, mark)
		maps.Copy(followed, read.beats)
		mark = read.newest
	}
	for following := true; following; {
		select {
		case <-done:
			following = false
		default:
		}
		follow()
	}
	follow()
	var whole map[string]time.Time
	must(t, s.View(ctx, func(tx store.Tx) (err error) {
		whole, err = tx.ListLiveness()
		return err
	}))
	if len(whole) != writers*(1+3*batches) {
		t.Fatalf("%d heartbeats recorded, want %d", len(whole), writers*(1+3*batches))
	}
	for id, at := range whole {
		if got, ok := followed[id]; !ok || !got.Equal(at) {
			t.Errorf("%s: the follower has %v (read: %v), the store %v", id, got, ok, at)
		}
	}
}

// BenchLiveness times a read of the heartbeats a second of a
// 50,000-machine fleet's brings (5,000, written untimed before each):
// sub-benchmark since reads those marked after the newest the last read
// saw, as a view's sync does; whole reads every row, as it did before
// heartbeats were marked. write times the write of those 5,000.
func BenchLiveness(b *testing.B, open func(b *testing.B) store.Store) {
	b.Run("since", func(b *testing.B) { benchLivenessReads(b, open(b), false) })
	b.Run("whole", func(b *testing.B) { benchLivenessReads(b, open(b), true) })
	b.Run("write", func(b *testing.B) { benchLivenessWrites(b, open(b)) })
}

// The benchmarks' fleet, and the heartbeats it sends a second.
const benchMachines, benchBeatsPerSecond = 50000, 5000

// fleetBeats writes the fleet's heartbeats in turn, each second's later
// than the last's.
type fleetBeats struct {
	s    store.Store
	at   time.Time
	next int
}

func newFleetBeats(b *testing.B, s store.Store) *fleetBeats {
	f := &fleetBeats{s: s, at: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f.write(b, benchMachines)
	return f
}

// second writes a second's heartbeats.
func (f *fleetBeats) second(b *testing.B) {
	f.at = f.at.Add(time.Second)
	f.write(b, benchBeatsPerSecond)
}

func (f *fleetBeats) write(b *testing.B, n int) {
	beats := make(map[string]time.Time, n)
	for range n {
		beats[fmt.Sprintf("m%05d", f.next%benchMachines)] = f.at
		f.next++
	}
	if err := f.s.Update(context.Background(), func(tx store.Tx) error { return tx.PutLiveness(beats) }); err != nil {
		b.Fatal(err)
	}
}

func benchLivenessWrites(b *testing.B, s store.Store) {
	f := newFleetBeats(b, s)
	for b.Loop() {
		f.second(b)
	}
}

func benchLivenessReads(b *testing.B, s store.Store, whole bool) {
	f := newFleetBeats(b, s)
	mark := store.AllLiveness
	read := func() int {
		rows := 0
		err := s.View(context.Background(), func(tx store.Tx) error {
			return tx.ScanLiveness(mark, func(_ string, _ time.Time, m int64) { rows, mark = rows+1, max(mark, m) })
		})
		if err != nil {
			b.Fatal(err)
		}
		if whole {
			mark = store.AllLiveness
		}
		return rows
	}
	read()
	want := benchBeatsPerSecond
	if whole {
		want = benchMachines
	}
	for b.Loop() {
		b.StopTimer()
		f.second(b)
		b.StartTimer()
		if rows := read(); rows != want {
			b.Fatalf("read %d heartbeats, want %d", rows, want)
		}
	}
}
