package controller

import (
	"context"
	"errors"
	"time"

	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/store"
)

// feedPosition follows the change feed from pass to pass, to measure a
// decision's latency: from the oldest change a pass is the first to read
// to the end of the act step that carries the decision out.
type feedPosition struct {
	// after: the changes up to this revision were read by an earlier
	// pass, or written by its act step (when known).
	after int64
	known bool
	// oldest is when the oldest change after it was committed (zero:
	// none, or unknown).
	oldest time.Time
}

// read notes, in the pass's read transaction, the oldest change the
// pass is the first to see.
func (f *feedPosition) read(tx store.Tx) error {
	f.oldest = time.Time{}
	if !f.known {
		rev, err := tx.Revision()
		f.after, f.known = rev, err == nil
		return err
	}
	changes, err := tx.Changes(store.ChangeFilter{After: f.after, Limit: 1})
	if errors.Is(err, store.ErrCompacted) {
		return nil // the pass before was long ago: no latency to tell
	}
	if err != nil {
		return err
	}
	if len(changes) > 0 {
		f.oldest = changes[0].At
	}
	return nil
}

// recordDecision observes the latency of a pass that changed something,
// and moves past what the pass read and wrote (its own writes cause
// nothing to measure).
func (c *Controller) recordDecision(ctx context.Context, plan decide.Plan) {
	if plan.Acts() && !c.feed.oldest.IsZero() {
		c.Metrics.Decided(c.Clock.Since(c.feed.oldest).Seconds())
	}
	err := c.Store.View(ctx, func(tx store.Tx) error {
		rev, err := tx.Revision()
		c.feed.after = rev
		return err
	})
	c.feed.known = err == nil
}
