package scheduler

import (
	"fmt"
	"maps"
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

// Calls that add to one result (PlaceInto, FillInto) decide what the
// same calls of Place and Fill decide, gathered: random batches placed
// in turn on one session, which reuses its list of grouped replicas
// from call to call.
func TestPlacingIntoAResultGathersWhatEachCallDecides(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 9))
	for round := range 100 {
		fleet := randomFleet(rng)
		into, apart := NewSession(clonedFleet(fleet)), NewSession(clonedFleet(fleet))
		got := Result{Unplaced: map[string]string{}}
		want := Result{Unplaced: map[string]string{}}
		for batch := range 4 {
			pending := randomPending(rng)
			for i := range pending { // ids of their own: batches do not overlap
				pending[i].ID = fmt.Sprintf("%d-%s", batch, pending[i].ID)
			}
			if (batch+round)%2 == 0 {
				into.PlaceInto(&got, pending, testOpener(round%3 == 0))
				part := apart.Place(pending, testOpener(round%3 == 0))
				want.Placements = append(want.Placements, part.Placements...)
				want.Evictions = append(want.Evictions, part.Evictions...)
				maps.Copy(want.Unplaced, part.Unplaced)
				continue
			}
			before := len(got.Placements)
			left := into.FillInto(&got, pending)
			if placed := len(got.Placements) - before; placed != len(pending)-len(left) {
				t.Fatalf("round %d batch %d: FillInto added %d placements for %d replicas, %d left", round, batch, placed, len(pending), len(left))
			}
			part := apart.Fill(pending)
			want.Placements = append(want.Placements, part.Placements...)
			want.Evictions = append(want.Evictions, part.Evictions...)
			if !reflect.DeepEqual(left, part.Unplaced) {
				t.Fatalf("round %d batch %d: FillInto left %v, Fill %v", round, batch, left, part.Unplaced)
			}
		}
		if len(got.Placements)+len(want.Placements) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: into one result\n%+v\ncall by call\n%+v", round, got, want)
		}
	}
}
