// Package sqlitetest gives tests an empty SQLite store of their own, in
// the test's temporary directory and closed when the test ends.
package sqlitetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/gantry-dev/gantry/store/sqlite"
)

// Open is an empty store with the default settings.
func Open(t testing.TB) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.DefaultConfig(filepath.Join(t.TempDir(), "gantry.db")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
