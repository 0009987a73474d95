package store

import (
	"context"
	"errors"
	"sync"
	"time"
)

// The change feed: every write of a declared or observed object (the
// kinds below) gets the next revision of one store-wide sequence, and is
// recorded, with the object as written, in a change log that readers
// follow. Revisions grow in commit order: a reader that sees revision N
// sees every change up to N. The log keeps each change for a retention
// window (deletions included: they are the tombstones), and always the
// newest change, so that the store's revision survives pruning.
//
// Liveness (heartbeat times), events, credentials, tokens and secrets are
// not in the feed: heartbeats are batched beside the machines and would
// swamp it, events have their own ids, and secrets must never be
// streamed.

// Kinds in the feed.
const (
	FeedCluster       = "Cluster"
	FeedService       = "Service"
	FeedFailoverGroup = "FailoverGroup"
	FeedMachine       = "Machine"
	FeedReplica       = "Replica"
	// FeedMemory is the control loop's memory (deployments' progress,
	// failover phases): a change's Data is the entry's value, and writing
	// the value an entry holds is no change.
	FeedMemory = "Memory"
)

// Errors of the feed.
var (
	// ErrCompacted: the changes after that revision are no longer all
	// kept; the reader lists afresh and follows from the list's revision.
	ErrCompacted = errors.New("revision compacted: list again")
	// ErrConflict: a conditional write found the object at another
	// revision than the writer read.
	ErrConflict = errors.New("the object changed since it was read")
)

// Change is one write of an object in the feed.
type Change struct {
	Revision int64
	Kind     string
	Name     string
	// Created: the write made the object (it did not exist before).
	Created bool
	// Deleted: the write removed the object; Data is its last state.
	Deleted bool
	// Data is the object as written (JSON), its resourceVersion set to
	// the revision of the change.
	Data []byte
	At   time.Time
}

// ChangeFilter selects changes, oldest first.
type ChangeFilter struct {
	// After: changes with a greater revision. ErrCompacted when some of
	// them are no longer kept.
	After int64
	// Kinds: only these kinds (none: all).
	Kinds []string
	// Limit bounds the answer (0: 1000).
	Limit int
}

// FeedTx is what a transaction reads and checks of the feed; every Tx
// has it.
type FeedTx interface {
	// Revision is the newest revision this transaction sees (0 for a
	// store never written).
	Revision() (int64, error)
	// Changes reads the feed after a revision.
	Changes(f ChangeFilter) ([]Change, error)
	// CheckVersion fails with ErrConflict unless the object of kind and
	// name is at revision rv (rv 0: the object must not exist).
	CheckVersion(kind, name string, rv int64) error
}

// Notifier wakes the feed's followers: every store has one.
type Notifier interface {
	// Changed returns a channel closed at the next commit of a change
	// (on a shared store, by any server) after the call.
	Changed() <-chan struct{}
	// Fired counts the wake-ups so far: a reader that read the feed
	// after Fired said n has seen every change this server knows of
	// while Fired still says n.
	Fired() uint64
}

// Broadcast is a Notifier that its store fires after each commit.
type Broadcast struct {
	mu    sync.Mutex
	next  chan struct{}
	fired uint64
}

// Fired implements Notifier.
func (b *Broadcast) Fired() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fired
}

// Changed implements Notifier.
func (b *Broadcast) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.next == nil {
		b.next = make(chan struct{})
	}
	return b.next
}

// Fire wakes every follower waiting now.
func (b *Broadcast) Fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fired++
	if b.next != nil {
		close(b.next)
		b.next = nil
	}
}

// WaitForChange returns once the store may hold a revision after rev:
// at once when it does, else at the next change committed, or when ctx
// ends.
func WaitForChange(ctx context.Context, s Store, n Notifier, rev int64) error {
	for {
		changed := n.Changed()
		var now int64
		if err := s.View(ctx, func(tx Tx) error {
			var err error
			now, err = tx.Revision()
			return err
		}); err != nil {
			return err
		}
		if now > rev {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}
