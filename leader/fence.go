package leader

import (
	"context"
	"fmt"

	"github.com/gantry-dev/gantry/store"
)

// Fence wraps the store the control loop writes through: every write
// transaction first checks, inside itself, that this server's term is
// still current, so a deposed leader's writes are refused. Reads pass.
func Fence(s store.Store, e *Elector) store.Store { return fenced{Store: s, e: e} }

type fenced struct {
	store.Store
	e *Elector
}

func (f fenced) Update(ctx context.Context, fn func(store.Tx) error) error {
	term, ok := f.e.Term()
	if !ok {
		return fmt.Errorf("write as leader: %w", store.ErrFenced)
	}
	return f.Store.Update(ctx, func(tx store.Tx) error {
		if f.e.leases != nil {
			lt, ok := tx.(store.LeaseTx)
			if !ok {
				return fmt.Errorf("write as leader: the store's transactions cannot check a lease")
			}
			if err := lt.CheckLease(term); err != nil {
				return err
			}
		}
		return fn(tx)
	})
}
