package view

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/store"
)

// markedTx is a transaction whose liveness table is rows, each written
// under a mark; fail makes a scan fail after its first row, scanned
// counts the rows scans delivered.
type markedTx struct {
	store.Tx
	rows    map[string]markedBeat
	mark    int64
	fail    bool
	scanned int
}

type markedBeat struct {
	at   time.Time
	mark int64
}

// write records beats under the next mark.
func (tx *markedTx) write(beats map[string]time.Time) {
	tx.mark++
	for id, at := range beats {
		tx.rows[id] = markedBeat{at, tx.mark}
	}
}

func (tx *markedTx) ScanLiveness(after int64, each func(string, time.Time, int64)) error {
	for _, id := range slices.Sorted(maps.Keys(tx.rows)) {
		if b := tx.rows[id]; b.mark > after {
			tx.scanned++
			each(id, b.at, b.mark)
			if tx.fail {
				return errors.New("connection lost")
			}
		}
	}
	return nil
}

// The table reads only the heartbeats written since the newest mark it
// saw and names their machines; it reads every one, and asks for every
// machine to be looked at, on its first read and after a read that
// failed midway.
func TestBeatTableReadsWhatChanged(t *testing.T) {
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	tx := &markedTx{rows: map[string]markedBeat{}}
	tx.write(map[string]time.Time{"a": at, "b": at, "c": at})
	var table beatTable
	steps := []struct {
		name    string
		change  func()
		changed []string
		all     bool
		scanned int
	}{
		{"first read", func() {}, nil, true, 3},
		{"nothing new", func() {}, nil, false, 0},
		{"b beat", func() { tx.write(map[string]time.Time{"b": at.Add(time.Second)}) }, []string{"b"}, false, 1},
		{"d's first beat", func() { tx.write(map[string]time.Time{"d": at}) }, []string{"d"}, false, 1},
		{"a read that failed", func() { tx.write(map[string]time.Time{"a": at.Add(time.Second)}); tx.fail = true }, nil, true, 1},
		{"after it", func() { tx.fail = false }, nil, true, 4},
		{"c and d beat", func() { tx.write(map[string]time.Time{"c": at.Add(time.Second), "d": at.Add(time.Second)}) }, []string{"c", "d"}, false, 2},
	}
	for _, s := range steps {
		s.change()
		tx.scanned = 0
		changed, all, err := table.read(tx)
		if (err != nil) != tx.fail || all != s.all || !slices.Equal(changed, s.changed) || tx.scanned != s.scanned {
			t.Fatalf("%s: changed %v, all %v, err %v, %d rows read; want %v, %v, %d rows", s.name, changed, all, err, tx.scanned, s.changed, s.all, s.scanned)
		}
		want := map[string]time.Time{}
		for id, b := range tx.rows {
			want[id] = b.at
		}
		if err == nil && !maps.Equal(table.at, want) {
			t.Fatalf("%s: the table holds %v, the store %v", s.name, table.at, want)
		}
	}
}
