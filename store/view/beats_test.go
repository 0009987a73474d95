package view

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/store"
)

// scanTx is a transaction whose liveness table is rows; fail makes the
// scan fail after its first row.
type scanTx struct {
	store.Tx
	rows map[string]time.Time
	fail bool
}

func (tx *scanTx) ScanLiveness(each func(string, time.Time)) error {
	for _, id := range slices.Sorted(maps.Keys(tx.rows)) {
		each(id, tx.rows[id])
		if tx.fail {
			return errors.New("connection lost")
		}
	}
	return nil
}

// The table names the machines whose heartbeat changed since the last
// read, and asks for every machine to be looked at on its first read,
// after a read that failed midway, and when rows were deleted.
func TestBeatTableNamesWhatChanged(t *testing.T) {
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	tx := &scanTx{rows: map[string]time.Time{"a": at, "b": at, "c": at}}
	var table beatTable
	steps := []struct {
		name    string
		change  func()
		changed []string
		all     bool
	}{
		{"first read", func() {}, []string{"a", "b", "c"}, true},
		{"nothing new", func() {}, nil, false},
		{"b beat", func() { tx.rows["b"] = at.Add(time.Second) }, []string{"b"}, false},
		{"d's first beat", func() { tx.rows["d"] = at }, []string{"d"}, false},
		{"a read that failed", func() { tx.rows["a"], tx.fail = at.Add(time.Second), true }, nil, true},
		{"after it", func() { tx.fail = false }, nil, true},
		{"c's row deleted", func() { delete(tx.rows, "c") }, nil, true},
	}
	for _, s := range steps {
		s.change()
		changed, all, err := table.read(tx)
		if (err != nil) != tx.fail || all != s.all || !slices.Equal(changed, s.changed) {
			t.Fatalf("%s: changed %v, all %v, err %v; want %v, %v", s.name, changed, all, err, s.changed, s.all)
		}
		if err == nil && !maps.Equal(table.at, tx.rows) {
			t.Fatalf("%s: the table holds %v, the store %v", s.name, table.at, tx.rows)
		}
	}
}
