package scheduler

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/gantry-dev/gantry/api"
)

// First fit by walking the machines places exactly as first fit through
// the fit index: random fleets (partly full, some machines being
// emptied) and random classes, some self-exclusive, of 1 to 30 replicas,
// with and without machines opened on the way, placed both ways. Small
// fleets run the walk's budget out mid-class, so the hand-over to the
// index is exercised too.
func TestWalkedFirstFitPlacesAsTheIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 7))
	walks := 0
	for round := range 400 {
		fleet := randomFleet(rng)
		pending := randomPending(rng)
		opens := round%2 == 1
		walked := NewSession(clonedFleet(fleet))
		res := walked.Place(pending, testOpener(opens))
		indexed := NewSession(clonedFleet(fleet))
		indexed.st.walked = len(indexed.st.order) // the index from the start
		want := indexed.Place(pending, testOpener(opens))
		if !reflect.DeepEqual(res, want) {
			t.Fatalf("round %d: walked\n%+v\nindexed\n%+v", round, res, want)
		}
		if walked.st.walked > 0 {
			walks++
		}
	}
	if walks < 100 {
		t.Fatalf("only %d of 400 rounds walked", walks)
	}
}

func randomFleet(rng *rand.Rand) []*Machine {
	var fleet []*Machine
	for i := range 1 + rng.IntN(40) {
		m := machine(fmt.Sprintf("m%02d", i), "g", int64(1000+rng.IntN(8)*1000), int64(1+rng.IntN(16)))
		for k := range rng.IntN(4) {
			r := replica(fmt.Sprintf("old%d", rng.IntN(3)), i*10+k, int64(rng.IntN(6)*250), int64(rng.IntN(8)*256))
			if fitsNow(m, r) {
				Assign(m, r, nil)
			}
		}
		m.excluded = rng.IntN(10) == 0
		fleet = append(fleet, m)
	}
	return fleet
}

func fitsNow(m *Machine, r Replica) bool { why, _ := dynamicFit(m, &r, false); return why == "" }

func randomPending(rng *rand.Rand) []Replica {
	var pending []Replica
	for s := range 1 + rng.IntN(3) {
		svc := fmt.Sprintf("svc%d", s)
		cpu, mem := int64(100+rng.IntN(16)*100), int64(64+rng.IntN(16)*128)
		exclusive := rng.IntN(3) == 0
		for i := range 1 + rng.IntN(30) {
			r := replica(svc, i, cpu, mem)
			if exclusive {
				label := map[string]string{"app": svc}
				r = labelled(r, label)
				r.Terms = &Terms{AntiAffinity: required(api.SpreadMachine, label)}
			}
			pending = append(pending, r)
		}
	}
	return pending
}

// clonedFleet copies every machine with its own counts.
func clonedFleet(fleet []*Machine) []*Machine {
	out := make([]*Machine, len(fleet))
	for i, m := range fleet {
		out[i] = m.Clone()
		out[i].excluded = m.excluded // what Clone resets
	}
	return out
}

// testOpener opens a machine of 4 cores for each replica nothing took
// (nil when opens is false).
func testOpener(opens bool) Opener {
	if !opens {
		return nil
	}
	n := 0
	return func(r *Replica, zone string) (*Machine, string) {
		n++
		return machine(fmt.Sprintf("new%03d", n), "g", 4000, 8), ""
	}
}
