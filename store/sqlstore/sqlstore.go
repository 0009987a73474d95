// Package sqlstore is the Tx that the SQL stores share: the same queries
// and row encoding (JSON documents beside the indexed columns) over
// database/sql, with what differs per database (placeholders, error
// classification, migrations) in a Dialect.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/gantry-dev/gantry/store"
)

// Dialect is what differs between the SQL databases.
type Dialect struct {
	// NumberedParams: placeholders are $1, $2, … instead of ?.
	NumberedParams bool
	// IsConflict reports a broken unique or primary key constraint.
	IsConflict func(error) bool
	// MaxEvents bounds the event table; older events are pruned.
	MaxEvents int
	// Feed is the change feed's part.
	Feed Feed
	// Marks number the heartbeats' writes (LivenessMarks).
	Marks LivenessMarks
	// WriteBehind, when set, holds replica writes and events back to send
	// them together (writebehind.go; with deferred revisions only).
	WriteBehind *WriteBehind

	// statements are prepared once per database (and by database/sql
	// once per connection): parsing the SQL of every query anew took a
	// quarter of a busy server's CPU.
	statements sync.Map // statementKey → *sql.Stmt
	// preparing counts the statements being prepared in the background.
	preparing sync.WaitGroup
}

// LivenessMarks number each write of heartbeats with a mark greater
// than every mark written before, in commit order: a reader that saw
// mark N sees every write up to N, and reads only the rows marked after
// it next time (a sync reads the heartbeats that changed, not 50,000).
type LivenessMarks struct {
	// Lock, when set, is taken before the mark is drawn and held until
	// the commit, so that marks follow commit order (PostgreSQL's
	// sequences hand out values in call order, not commit order).
	Lock string
	// Next draws the write's mark.
	Next string
}

// Closed waits for the background preparations once the databases are
// closed (they fail then), so that none opens a connection, and creates
// files, after the store's Close returned.
func (d *Dialect) Closed() { d.preparing.Wait() }

type statementKey struct {
	db    *sql.DB
	query string
}

// statement returns query prepared on db, or nil the first time: it is
// then prepared in the background, once a connection is free (the SQLite
// writer has one, held by the caller's transaction), and the caller runs
// the query unprepared.
func (d *Dialect) statement(db *sql.DB, query string) *sql.Stmt {
	key := statementKey{db, query}
	v, loaded := d.statements.LoadOrStore(key, (*sql.Stmt)(nil))
	if loaded {
		return v.(*sql.Stmt)
	}
	d.preparing.Go(func() {
		s, err := db.PrepareContext(context.Background(), query)
		if err != nil {
			d.statements.Delete(key) // tried again next time
			return
		}
		d.statements.Store(key, s)
	})
	return nil
}

func (d *Dialect) rebind(query string) string {
	if !d.NumberedParams || !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Failure classifies a database error: a broken constraint is a
// conflict (store.ErrExists), a cancelled context the caller's, anything
// else the store's own failure (store.ErrUnavailable).
func (d *Dialect) Failure(op string, err error) error { return d.failure(op, err) }

func (d *Dialect) failure(op string, err error) error {
	switch {
	case d.IsConflict != nil && d.IsConflict(err):
		return fmt.Errorf("%s: %w: %w", op, store.ErrExists, err)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", op, err)
	}
	return store.Unavailable(op, err)
}

func (d *Dialect) notFound(kind, name string, err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s %q: %w", kind, name, store.ErrNotFound)
	}
	return d.failure(fmt.Sprintf("read %s %q", kind, name), err)
}

// Tx wraps a transaction of db as a store.Tx.
func (d *Dialect) Tx(ctx context.Context, db *sql.DB, sqlTx *sql.Tx) store.Tx {
	return d.newTx(ctx, db, sqlTx)
}

func (d *Dialect) newTx(ctx context.Context, db *sql.DB, sqlTx *sql.Tx) *tx {
	return &tx{ctx: ctx, db: db, tx: sqlTx, dialect: d, maxEvents: d.MaxEvents}
}

// SQL returns the database transaction under a Tx made by Tx (for the
// statements a store adds, such as its lease's).
func SQL(t store.Tx) (*sql.Tx, bool) {
	inner, ok := t.(*tx)
	if !ok {
		return nil, false
	}
	return inner.tx, true
}

// Run runs fn in one transaction of db: committed when fn returns nil
// and this is not read-only, rolled back otherwise.
func (d *Dialect) Run(ctx context.Context, db *sql.DB, opts *sql.TxOptions, fn func(store.Tx) error) error {
	sqlTx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return d.failure("begin transaction", err)
	}
	t := d.newTx(ctx, db, sqlTx)
	if err := fn(t); err != nil {
		_ = sqlTx.Rollback()
		return err
	}
	if opts != nil && opts.ReadOnly {
		return sqlTx.Rollback()
	}
	if err := t.flush(); err != nil {
		_ = sqlTx.Rollback()
		return err
	}
	if t.wroteChanges {
		if err := t.beforeCommit(); err != nil {
			_ = sqlTx.Rollback()
			return err
		}
	}
	if err := sqlTx.Commit(); err != nil {
		if errors.Is(err, sql.ErrTxDone) && ctx.Err() != nil {
			err = ctx.Err() // database/sql rolled it back when the context ended
		}
		return d.failure("commit", err)
	}
	if t.wroteChanges && d.Feed.Committed != nil {
		d.Feed.Committed()
	}
	d.pruneAfterCommit(ctx, db, opts, t)
	return nil
}

// Migrate brings db to the last of migrations, one transaction per
// version, recorded in schema_migrations. lock, when set, runs first in
// each migration's transaction so that servers starting together do not
// migrate at once. A database newer than this binary is refused.
func (d *Dialect) Migrate(ctx context.Context, db *sql.DB, lock string, migrations []string) error {
	for {
		done := false
		err := d.Run(ctx, db, nil, func(t store.Tx) error {
			sqlTx, _ := SQL(t)
			if lock != "" {
				if _, err := sqlTx.ExecContext(ctx, lock); err != nil {
					return fmt.Errorf("lock for migration: %w", err)
				}
			}
			if _, err := sqlTx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)`); err != nil {
				return fmt.Errorf("create migrations table: %w", err)
			}
			var applied int
			if err := sqlTx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&applied); err != nil {
				return fmt.Errorf("read schema version: %w", err)
			}
			if applied > len(migrations) {
				return fmt.Errorf("database schema version %d is newer than this gantry (%d): upgrade gantry", applied, len(migrations))
			}
			if done = applied == len(migrations); done {
				return nil
			}
			if _, err := sqlTx.ExecContext(ctx, migrations[applied]); err != nil {
				return fmt.Errorf("migration %d: %w", applied+1, err)
			}
			_, err := sqlTx.ExecContext(ctx, d.rebind(`INSERT INTO schema_migrations(version) VALUES (?)`), applied+1)
			return err
		})
		if err != nil || done {
			return err
		}
	}
}
