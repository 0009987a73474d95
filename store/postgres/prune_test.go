package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/postgres/pgtest"
)

// openWith opens a store of the defaults that tune changes.
func openWith(t *testing.T, tune func(*Config)) *Store {
	t.Helper()
	cfg := DefaultConfig(pgtest.URL(t))
	tune(&cfg)
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// writeAroundAnother runs a write that takes its snapshot (first), waits
// while other writes and commits, then writes rest and commits; it
// returns how many times the write ran.
func writeAroundAnother(t *testing.T, s *Store, first, rest func(store.Tx) error, other func() error) int {
	t.Helper()
	began, release := make(chan struct{}), make(chan struct{})
	attempts, done := 0, make(chan error, 1)
	go func() {
		done <- s.Update(context.Background(), func(tx store.Tx) error {
			attempts++
			if err := first(tx); err != nil {
				return err
			}
			if attempts == 1 {
				close(began)
				<-release
			}
			return rest(tx)
		})
	}()
	<-began
	err := other()
	close(release)
	if err := errors.Join(err, <-done); err != nil {
		t.Fatal(err)
	}
	return attempts
}

// A writer whose commit crosses a pruning boundary while another writer,
// of another table, pruned, commits at its first attempt: the prune runs
// after the commit, in its own transaction. (Inside the writer's
// transaction, it deleted the changes the other prune had deleted, and
// the writer failed its serialization and ran again: at 50,000 joining
// machines, the leader's memory writes and the joins kept failing on
// each other that way, though they share no table but the feed's.)
func TestPruningDoesNotFailAConcurrentWriter(t *testing.T) {
	ctx := context.Background()
	s := openWith(t, func(c *Config) { c.ChangeRetention = time.Nanosecond })
	put := func(tx store.Tx, i int) error {
		return tx.PutReplica(&api.Replica{ID: fmt.Sprintf("r%d", i), Service: "web", Cluster: "dev"})
	}
	for i := range 98 {
		if err := s.Update(ctx, func(tx store.Tx) error { return put(tx, i) }); err != nil {
			t.Fatal(err)
		}
	}
	attempts := writeAroundAnother(t, s,
		func(tx store.Tx) error { return tx.PutMemory("idle/m0", "a") },
		func(tx store.Tx) error {
			for i := range 100 { // its revisions cross the next boundary
				if err := tx.PutMemory(fmt.Sprintf("idle/m%d", i+1), "a"); err != nil {
					return err
				}
			}
			return nil
		},
		func() error { // revisions 99 and 100: the boundary; the changes before are pruned
			return s.Update(ctx, func(tx store.Tx) error { return errors.Join(put(tx, 98), put(tx, 99)) })
		})
	if attempts != 1 {
		t.Errorf("the writer ran %d times, want once: it failed on the other writer's prune", attempts)
	}
	err := s.View(ctx, func(tx store.Tx) error {
		_, err := tx.Changes(store.ChangeFilter{After: 98})
		return err
	})
	if !errors.Is(err, store.ErrCompacted) {
		t.Errorf("changes after 98: %v, want ErrCompacted: the prune after the writer's commit did not run", err)
	}
}

// The same for the events: a writer of events whose ids cross a pruning
// boundary while another writer pruned the oldest events commits at its
// first attempt (inside its transaction, its prune deleted rows the other
// had deleted, and it failed: at 50,000 joining machines, the leader's
// act failed on "prune events" over and over).
func TestPruningEventsDoesNotFailAConcurrentWriter(t *testing.T) {
	ctx := context.Background()
	s := openWith(t, func(c *Config) { c.MaxEvents = 10 })
	event := func(tx store.Tx) error {
		return tx.AddEvent(&api.Event{Type: api.EventNormal, Reason: "Test", ObjectKind: "Machine", ObjectName: "m1"})
	}
	for range 95 {
		if err := s.Update(ctx, event); err != nil {
			t.Fatal(err)
		}
	}
	attempts := writeAroundAnother(t, s, event,
		func(tx store.Tx) error {
			for range 100 { // its ids cross the next boundary
				if err := event(tx); err != nil {
					return err
				}
			}
			return nil
		},
		func() error { // up to id 101 at most: the first boundary, and its prune
			for range 5 {
				if err := s.Update(ctx, event); err != nil {
					return err
				}
			}
			return nil
		})
	if attempts != 1 {
		t.Errorf("the writer ran %d times, want once: it failed on the other writer's prune", attempts)
	}
	var kept []*api.Event
	err := s.View(ctx, func(tx store.Tx) error {
		var err error
		kept, err = tx.ListEvents(store.EventFilter{})
		return err
	})
	if err != nil || len(kept) > 120 {
		t.Errorf("%d events kept (%v): the writer's prune after its commit did not run", len(kept), err)
	}
}
