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
//
// The lease row is the fence (CheckLease): writes of a term hold it FOR
// KEY SHARE. A renewal of the holder's running term updates the row
// without waiting for them (an UPDATE of columns that are not its key
// takes FOR NO KEY UPDATE, which KEY SHARE does not block); a new term
// locks the row FOR UPDATE first, which waits until every write of the
// old term that checked the lease has ended. Before, the fence was FOR
// SHARE, which a renewal waits for too: a leader whose pass wrote for
// seconds (10,000 replicas) could not renew, stepped down, and lost the
// pass, over and over.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, error) {
	var epoch int64
	err := s.leases.QueryRowContext(ctx, `
		UPDATE leases SET expires_at = clock_timestamp() + $3 * interval '1 microsecond'
		WHERE name = $1 AND holder = $2 AND expires_at > clock_timestamp()
		RETURNING epoch`, name, holder, ttl.Microseconds()).Scan(&epoch)
	switch {
	case err == nil:
		return store.Lease{Name: name, Holder: holder, Epoch: epoch}, nil
	case !errors.Is(err, sql.ErrNoRows):
		return store.Lease{}, s.dialect.Failure("renew lease "+name, err)
	}
	return s.beginTerm(ctx, name, holder, ttl)
}

// beginTerm takes the lease for a new term, once the old term's checked
// writes have ended; ErrLeaseHeld while another holder's term runs.
func (s *Store) beginTerm(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, error) {
	// Another holder's running term is told without a lock: a follower
	// asks every retry period, and a lock it queued would hold up the
	// leader's renewal behind the leader's own writes.
	var held bool
	err := s.leases.QueryRowContext(ctx, `SELECT holder <> $2 AND expires_at > clock_timestamp() FROM leases WHERE name = $1`, name, holder).Scan(&held)
	switch {
	case err == nil && held:
		return store.Lease{}, fmt.Errorf("lease %s: %w", name, store.ErrLeaseHeld)
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return store.Lease{}, s.dialect.Failure("acquire lease "+name, err)
	}
	tx, err := s.leases.BeginTx(ctx, nil)
	if err != nil {
		return store.Lease{}, s.dialect.Failure("acquire lease "+name, err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM leases WHERE name = $1 FOR UPDATE`, name); err != nil {
		return store.Lease{}, s.dialect.Failure("acquire lease "+name, err)
	}
	var epoch int64
	err = tx.QueryRowContext(ctx, `
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
	if err := tx.Commit(); err != nil {
		return store.Lease{}, s.dialect.Failure("acquire lease "+name, err)
	}
	return store.Lease{Name: name, Holder: holder, Epoch: epoch}, nil
}

// ReleaseLease implements store.Leases.
func (s *Store) ReleaseLease(ctx context.Context, l store.Lease) error {
	_, err := s.leases.ExecContext(ctx, `UPDATE leases SET expires_at = clock_timestamp() WHERE name = $1 AND holder = $2 AND epoch = $3`, l.Name, l.Holder, l.Epoch)
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

// CheckLease implements store.LeaseTx. The row lock it takes (KEY SHARE)
// makes a new term (which locks the row FOR UPDATE) wait until this
// transaction has ended, so no write of an old term commits after a new
// term began; the holder's renewals do not wait for it.
func (t *leaseTx) CheckLease(l store.Lease) error {
	sqlTx, ok := sqlstore.SQL(t.Tx)
	if !ok {
		return fmt.Errorf("check lease %s: not a postgres transaction", l.Name)
	}
	var one int
	err := sqlTx.QueryRowContext(t.ctx, `SELECT 1 FROM leases WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires_at > clock_timestamp() FOR KEY SHARE`,
		l.Name, l.Holder, l.Epoch).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("lease %s epoch %d: %w", l.Name, l.Epoch, store.ErrFenced)
	case err != nil:
		return t.s.dialect.Failure("check lease "+l.Name, err)
	}
	return nil
}
