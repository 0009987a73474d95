package controller

import (
	"context"
	"errors"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/store"
)

// feedPosition follows the change feed from pass to pass, to measure a
// decision's latency: from the oldest change a pass is the first to read
// to the end of the act step that carries the decision out. A pass's own
// writes cause nothing: the next pass skips the changes of the objects
// its act step wrote. Changes others committed while a pass ran are the
// next pass's to measure (they wait the longest).
type feedPosition struct {
	// after: the changes up to this revision were read by an earlier
	// pass (when known).
	after int64
	known bool
	// own are the objects the last act step wrote, by feedKey.
	own map[string]bool
	// oldest is when the oldest change after it, not the pass's own, was
	// committed (zero: none, or unknown).
	oldest time.Time
	// batch is how many changes one read of the feed takes.
	batch int
}

func feedKey(kind, name string) string { return kind + "/" + name }

// read notes, in the pass's read transaction, the oldest change the
// pass is the first to see.
func (f *feedPosition) read(tx store.Tx) error {
	f.oldest = time.Time{}
	if !f.known {
		rev, err := tx.Revision()
		f.after, f.known = rev, err == nil
		return err
	}
	for from := f.after; ; {
		changes, err := tx.Changes(store.ChangeFilter{After: from, Limit: max(f.batch, 1)})
		if errors.Is(err, store.ErrCompacted) {
			return nil // the pass before was long ago: no latency to tell
		}
		if err != nil {
			return err
		}
		for _, c := range changes {
			if !f.own[feedKey(c.Kind, c.Name)] {
				f.oldest = c.At
				return nil
			}
		}
		if len(changes) < max(f.batch, 1) {
			return nil
		}
		from = changes[len(changes)-1].Revision
	}
}

// recordDecision observes the latency of a pass that changed something,
// and moves past what the pass read, at revision; the objects its act
// step wrote (own) are not causes for the next.
func (c *Controller) recordDecision(plan decide.Plan, revision int64, own map[string]bool) {
	if plan.Acts() && !c.feed.oldest.IsZero() {
		c.Metrics.Decided(c.Clock.Since(c.feed.oldest).Seconds())
	}
	c.feed.after, c.feed.own = revision, own
}

// ownWrites is a store whose write transactions note the objects of the
// feed they write (an act step's).
type ownWrites struct {
	store.Store
	names map[string]bool
}

func (s *ownWrites) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.Store.Update(ctx, func(tx store.Tx) error { return fn(&ownTx{Tx: tx, names: s.names}) })
}

// ownTx notes the objects of the feed it writes. A write it does not
// note counts as a cause for the next pass: its latency is overstated,
// never lost.
type ownTx struct {
	store.Tx
	names map[string]bool
}

func (t *ownTx) note(kind, name string) { t.names[feedKey(kind, name)] = true }

func (t *ownTx) PutCluster(cl *api.Cluster) error {
	t.note(store.FeedCluster, cl.Metadata.Name)
	return t.Tx.PutCluster(cl)
}

func (t *ownTx) PutService(s *api.Service) error {
	t.note(store.FeedService, s.Metadata.Name)
	return t.Tx.PutService(s)
}

func (t *ownTx) PutFailoverGroup(g *api.FailoverGroup) error {
	t.note(store.FeedFailoverGroup, g.Metadata.Name)
	return t.Tx.PutFailoverGroup(g)
}

func (t *ownTx) CreateMachine(m *api.Machine) error {
	t.note(store.FeedMachine, m.ID)
	return t.Tx.CreateMachine(m)
}

func (t *ownTx) PutMachine(m *api.Machine) error {
	t.note(store.FeedMachine, m.ID)
	return t.Tx.PutMachine(m)
}

func (t *ownTx) PutReplica(r *api.Replica) error {
	t.note(store.FeedReplica, r.ID)
	return t.Tx.PutReplica(r)
}

func (t *ownTx) DeleteReplica(id string) error {
	t.note(store.FeedReplica, id)
	return t.Tx.DeleteReplica(id)
}

func (t *ownTx) PutMemory(key, value string) error {
	t.note(store.FeedMemory, key)
	return t.Tx.PutMemory(key, value)
}

func (t *ownTx) DeleteMemory(key string) error {
	t.note(store.FeedMemory, key)
	return t.Tx.DeleteMemory(key)
}
