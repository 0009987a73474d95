package e2e

import (
	"bytes"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// Drain the busiest machine: each replica's new copy runs before the old
// stops (the old copy answers for as long as the replica is moving), then
// the machine is terminated.
func TestDrainMovesReplicasNewCopyFirst(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	s := startWeb(t)
	dir := s.dataDir
	before := s.replicas("web")
	victim := busiestMachine(before)

	// Watch while draining: a replica whose previous machine is the victim
	// must still answer at its old address. The store ends a move before
	// the victim's agent stops the old copy, so a copy that does not
	// answer is a gap only if the replica, read again after, still moves
	// off the victim (not a move that ended between the list and the
	// request).
	var mu sync.Mutex
	var gaps []string
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		old := map[string]api.Replica{}
		for _, r := range before {
			old[r.ID] = r
		}
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			for _, r := range s.replicas("web") {
				if r.PreviousMachine != victim {
					continue
				}
				if _, ok := answers(old[r.ID]); !ok && stillMovingOff(s.replicas("web"), r.ID, victim) {
					mu.Lock()
					gaps = append(gaps, r.ID+" stopped on "+victim+" before its new copy ran")
					mu.Unlock()
				}
			}
		}
	}()
	cmd := exec.Command(gantryBin, "--data-dir", dir, "drain", victim, "--wait", "--deadline", "60s", "--poll-interval", "200ms")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("drain --wait: %v\n%s", err, out.String())
	}
	close(stop)
	<-watched
	if !strings.Contains(out.String(), "terminated, 0 replica(s) on it") {
		t.Fatalf("drain output:\n%s", out.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(gaps) > 0 {
		t.Fatalf("replicas had no running copy while moving: %v", gaps)
	}
	for _, r := range s.replicas("web") {
		if r.Machine == victim || r.PreviousMachine == victim {
			t.Fatalf("replica %s still tied to %s", r.ID, victim)
		}
	}
	// The machine that replaced the victim joins empty; the spread
	// (maxSkew 1 over machines) is repaired by moves, new copy first.
	waitFor(t, "replicas answering, spread again", func() (bool, string) {
		rs := s.replicas("web")
		for _, r := range rs {
			if r.PreviousMachine != "" {
				return false, r.ID + " still moving"
			}
		}
		return allAnswer(rs, 3)
	})
	events, _, _ := s.gantry("get", "events")
	if !strings.Contains(events, "Moved") || !strings.Contains(events, "drained") {
		t.Fatalf("events lack the moves or the drain:\n%s", events)
	}
}

// stillMovingOff: replica id, in rs, is moving off machine.
func stillMovingOff(rs []api.Replica, id, machine string) bool {
	for _, r := range rs {
		if r.ID == id {
			return r.PreviousMachine == machine
		}
	}
	return false
}
