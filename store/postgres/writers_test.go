package postgres

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
)

// A write beyond MaxWriters waits for a running one to end before it
// begins; a reader does not wait.
func TestWritesBeyondTheBoundWaitTheirTurn(t *testing.T) {
	s := openWith(t, func(c *Config) { c.MaxWriters = 1 })
	ctx := context.Background()
	firstIn, releaseFirst, firstDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		firstDone <- s.Update(ctx, func(tx store.Tx) error {
			close(firstIn)
			<-releaseFirst
			return tx.PutReplica(&api.Replica{ID: "first", Service: "web", Cluster: "dev"})
		})
	}()
	<-firstIn
	secondIn, secondDone := make(chan struct{}), make(chan error, 1)
	go func() {
		secondDone <- s.Update(ctx, func(tx store.Tx) error {
			close(secondIn)
			return tx.PutReplica(&api.Replica{ID: "second", Service: "web", Cluster: "dev"})
		})
	}()
	deadline := time.Now().Add(30 * time.Second)
	for s.WaitingWriters() != 1 {
		select {
		case <-secondIn:
			t.Fatal("a second write began while the only writer's turn was taken")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the second write neither began nor waited")
		}
		runtime.Gosched()
	}
	if err := s.View(ctx, func(tx store.Tx) error { _, err := tx.Revision(); return err }); err != nil {
		t.Fatalf("a read while the writers' turns are taken: %v", err)
	}
	close(releaseFirst)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	if err := <-secondDone; err != nil {
		t.Fatal(err)
	}
	if n := s.WaitingWriters(); n != 0 {
		t.Fatalf("%d writers still wait", n)
	}
}
