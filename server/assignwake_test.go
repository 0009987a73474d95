package server

import (
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
)

// An agent's poll for its assignments is answered as soon as a replica
// is placed on its machine, and a poll when nothing changed on it is held
// for the server's wait and answers unchanged. A poll that
// names a revision the machine changed after is answered at once.
func TestAssignmentsPollWakesTheMachineAReplicaIsPlacedOn(t *testing.T) {
	ts, ctx := withTestCluster(t, func(c *Config) { c.Names.Wait = 2 * time.Second })
	credential := ts.joinManual(t, "dev", "m1")
	m1 := client.New(ts.URL(), credential, ts.http)
	first, err := m1.WaitAssignments(ctx, "m1", -1)
	if err != nil || first.Changed {
		t.Fatalf("first poll: %+v %v, want an answer at once, unchanged", first, err)
	}
	woke := make(chan *api.AssignmentsWait, 1)
	go func() {
		got, err := m1.WaitAssignments(ctx, "m1", first.Revision)
		if err != nil {
			t.Error(err)
		}
		woke <- got
	}()
	start := time.Now()
	applyWebOnM1(t, ts)
	select {
	case got := <-woke:
		if got == nil || !got.Changed || got.Revision <= first.Revision {
			t.Fatalf("poll after the placement: %+v, want changed at a later revision", got)
		}
		t.Logf("woken %s after the apply", time.Since(start).Round(time.Millisecond))
		again, err := m1.WaitAssignments(ctx, "m1", first.Revision)
		if err != nil || !again.Changed {
			t.Fatalf("a poll naming a revision the machine changed after: %+v %v, want changed at once", again, err)
		}
		quiet := time.Now()
		still, err := m1.WaitAssignments(ctx, "m1", again.Revision)
		if err != nil || still.Changed || time.Since(quiet) < time.Second {
			t.Fatalf("a poll with nothing new: %+v %v after %s, want unchanged after the server's wait", still, err, time.Since(quiet))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the poll was not answered when web-0 was placed on m1")
	}
	code, body := ts.do(t, "GET", "/v1/machines/m1/assignments/wait?since=-2", credential, "", nil)
	if code != 400 || body.Error.Field != "since" {
		t.Fatalf("since -2: %d %+v, want 400 naming since", code, body)
	}
}
