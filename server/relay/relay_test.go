package relay

import (
	"context"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// An agent's poll takes the requests queued for its machine only; a
// viewer that left withdraws its request and refuses further chunks.
func TestLogsPairsViewersWithTheirMachinesAgent(t *testing.T) {
	ctx := context.Background()
	h := NewLogs()
	taken := make(chan []api.LogRequest)
	go func() { taken <- h.Take(ctx, "m1", time.Minute) }()
	for {
		polling, polled := h.Polling("m1")
		if polling {
			break
		}
		<-polled
	}
	if polling, _ := h.Polling("m2"); polling {
		t.Fatal("m2's agent polls, though only m1's asked")
	}
	session := h.Open("m1", api.LogRequest{ID: "r1", ReplicaID: "web-1"})
	if got := <-taken; len(got) != 1 || got[0].ID != "r1" {
		t.Fatalf("m1's poll took %+v, want request r1", got)
	}
	if _, ok := h.Session("r1", "m2"); ok {
		t.Fatal("m2's agent may post to a session of m1")
	}
	posted, ok := h.Session("r1", "m1")
	if !ok || !posted.Post(ctx, Chunk{Data: []byte("hello\n")}) {
		t.Fatal("m1's agent could not post to its viewer")
	}
	if c := <-session.Chunks(); string(c.Data) != "hello\n" {
		t.Fatalf("viewer read %q", c.Data)
	}

	h.Open("m1", api.LogRequest{ID: "r2"})
	h.Close("r2")
	if got := h.Take(ctx, "m1", time.Millisecond); len(got) != 0 {
		t.Fatalf("a closed request was still handed out: %+v", got)
	}
	h.Close("r1")
	if posted.Post(ctx, Chunk{Data: []byte("late")}) {
		t.Fatal("a chunk was accepted after its viewer left")
	}
}

// A stream is claimed once, and only by its own machine's agent.
func TestStreamsAreClaimedOnceByTheirMachine(t *testing.T) {
	h := NewStreams()
	h.Open("s1", "m1")
	if _, ok := h.Claim("s1", "m2"); ok {
		t.Fatal("m2 claimed m1's stream")
	}
	if _, ok := h.Claim("s1", "m1"); !ok {
		t.Fatal("m1 could not claim its stream")
	}
	if _, ok := h.Claim("s1", "m1"); ok {
		t.Fatal("a stream was claimed twice")
	}
	h.Open("s2", "m1")
	h.Close("s2")
	if _, ok := h.Claim("s2", "m1"); ok {
		t.Fatal("a withdrawn stream was claimed")
	}
}
