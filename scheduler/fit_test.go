package scheduler

import "testing"

// The misses are counted by reason, however they alternate, and said by
// reason in order.
func TestMissTallyCountsEachReason(t *testing.T) {
	tally := missTally{total: 7}
	for _, why := range []string{"insufficient cpu", "no docker runtime", "insufficient cpu", "being emptied", "insufficient " + "cpu", "no docker runtime"} {
		tally.add(why)
	}
	if got, want := tally.reason(), "0/7 machines fit: 1 being emptied, 3 insufficient cpu, 2 no docker runtime"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}
