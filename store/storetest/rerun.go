package storetest

import (
	"context"
	"errors"

	"github.com/gantry-dev/gantry/store"
)

// Rerun wraps a store so that every Update runs its function twice: once
// in a transaction that is rolled back, then for real. Code that keeps to
// the Update contract (no effect outside the transaction, shared variables
// set afresh on each run) behaves exactly as with the plain store; tests
// run their subject on it to prove that.
func Rerun(s store.Store) store.Store { return rerun{s} }

type rerun struct{ store.Store }

var errRollback = errors.New("storetest: first run rolled back")

func (r rerun) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := r.Store.Update(ctx, func(tx store.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return errRollback
	}); !errors.Is(err, errRollback) {
		return err
	}
	return r.Store.Update(ctx, fn)
}
