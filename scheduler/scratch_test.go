package scheduler

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// A session made in a scratch the last session used places exactly as
// a session made afresh: random fleets of growing and shrinking size in
// one scratch, with and without machines opened on the way.
func TestSessionInAScratchPlacesAsAFreshOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 3))
	var scratch Scratch
	for round := range 200 {
		fleet := randomFleet(rng)
		pending := randomPending(rng)
		opens := round%3 == 0
		got := scratch.NewSession(clonedFleet(fleet)).Place(pending, testOpener(opens))
		want := NewSession(clonedFleet(fleet)).Place(pending, testOpener(opens))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: in the scratch\n%+v\nafresh\n%+v", round, got, want)
		}
		if round%7 == 0 {
			scratch.Clear()
		}
	}
}
