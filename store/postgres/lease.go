package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/sqlstore"
)

// AcquireLease implements store.Leases. Expiry is the database's clock.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, error) {
	var epoch int64
	err := s.db.QueryRowContext(ctx, `
		INSERT INTO leases(name, holder, epoch, expires_at) VALUES ($1, $2, 1, clock_timestamp() + $3 * interval '1 microsecond')
		ON CONFLICT(name) DO UPDATE SET
		  holder = excluded.holder,
		  epoch = CASE WHEN leases.holder = excluded.holder AND leases.expires_at > clock_timestamp() THEN leases.epoch ELSE leases.epoch + 1 END,
		  expires_at = excluded.expires_at
		WHERE leases.holder = excluded.holder OR leases.expires_at <= clock_timestamp()
		RETURNING epoch`, name, holder, ttl.Microseconds()).Scan(&epoch)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.Lease{}, fmt.Errorf("lease %s: %w", name, store.ErrLeaseHeld)
	case err != nil:
		return store.Lease{}, s.dialect.Failure("acquire lease "+name, err)
	}
	return store.Lease{Name: name, Holder: holder, Epoch: epoch}, nil
}

// ReleaseLease implements store.Leases.
func (s *Store) ReleaseLease(ctx context.Context, l store.Lease) error {
	_, err := s.db.ExecContext(ctx, `UPDATE leases SET expires_at = clock_timestamp() WHERE name = $1 AND holder = $2 AND epoch = $3`, l.Name, l.Holder, l.Epoch)
	if err != nil {
		return s.dialect.Failure("release lease "+l.Name, err)
	}
	return nil
}

// leaseTx adds CheckLease to a transaction of this store.
func (s *Store) leaseTx(ctx context.Context, t store.Tx) store.Tx {
	return &leaseTx{Tx: t, ctx: ctx, s: s}
}

type leaseTx struct {
	store.Tx
	ctx context.Context
	s   *Store
}

// CheckLease implements store.LeaseTx. The row lock it takes makes a new
// term (an UPDATE of the row) wait until this transaction has ended, so
// no write of an old term commits after a new term began.
func (t *leaseTx) CheckLease(l store.Lease) error {
	sqlTx, ok := sqlstore.SQL(t.Tx)
	if !ok {
		return fmt.Errorf("check lease %s: not a postgres transaction", l.Name)
	}
	var one int
	err := sqlTx.QueryRowContext(t.ctx, `SELECT 1 FROM leases WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires_at > clock_timestamp() FOR SHARE`,
		l.Name, l.Holder, l.Epoch).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("lease %s epoch %d: %w", l.Name, l.Epoch, store.ErrFenced)
	case err != nil:
		return t.s.dialect.Failure("check lease "+l.Name, err)
	}
	return nil
}
