package sqlite

import (
	"testing"

	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/storetest"
)

// BenchmarkLiveness: a view's read of a second's heartbeats at 50,000
// machines (storetest.BenchLiveness).
//
//	go test ./store/sqlite -run '^$' -bench Liveness -benchtime 100x
func BenchmarkLiveness(b *testing.B) {
	storetest.BenchLiveness(b, func(b *testing.B) store.Store { return openTempTB(b) })
}
