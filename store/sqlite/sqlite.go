// Package sqlite is the embedded Store: one SQLite file (pure-Go driver, no
// cgo), WAL journal with full fsync, so an acknowledged write survives the
// process being killed at any point.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/gantry-dev/gantry/store"
	"modernc.org/sqlite" // also registers the "sqlite" driver
)

// Config tunes the store.
type Config struct {
	// Path of the database file.
	Path string
	// BusyTimeout is how long a writer waits for the lock.
	BusyTimeout time.Duration
	// MaxEvents bounds the event table; older events are pruned.
	MaxEvents int
	// Readers is how many read transactions run at once, each on its own
	// connection, beside the one writer.
	Readers int
	// BusyRetries is how many times a write transaction that found the
	// database locked is run again.
	BusyRetries int
}

// DefaultConfig returns the defaults for a path.
func DefaultConfig(path string) Config {
	return Config{Path: path, BusyTimeout: 5 * time.Second, MaxEvents: 10000, Readers: 4, BusyRetries: 3}
}

// Store is the SQLite Store: one writer connection, and a pool of
// read-only connections that WAL lets read while the writer writes.
type Store struct {
	writer, reader *sql.DB
	cfg            Config
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) and migrates the database.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	writer, err := openDB(cfg, false)
	if err != nil {
		return nil, err
	}
	// One writer: SQLite has one anyway, and this way writes queue here
	// instead of failing busy.
	writer.SetMaxOpenConns(1)
	s := &Store{writer: writer, cfg: cfg}
	if err := s.migrate(ctx); err != nil {
		writer.Close()
		return nil, err
	}
	if s.reader, err = openDB(cfg, true); err != nil {
		writer.Close()
		return nil, err
	}
	s.reader.SetMaxOpenConns(max(cfg.Readers, 1))
	return s, nil
}

func openDB(cfg Config, readOnly bool) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(ON)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
		q.Add("_txlock", "deferred")
	} else {
		q.Add("_txlock", "immediate")
	}
	db, err := sql.Open("sqlite", "file:"+cfg.Path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", cfg.Path, err)
	}
	return db, nil
}

// Close closes the database.
func (s *Store) Close() error {
	var err error
	if s.reader != nil {
		err = s.reader.Close()
	}
	return errors.Join(err, s.writer.Close())
}

// Update runs fn in a write transaction, again when the database was
// locked by another process.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	for attempt := 0; ; attempt++ {
		err := s.run(ctx, s.writer, false, fn)
		if !isBusy(err) || attempt >= s.cfg.BusyRetries || ctx.Err() != nil {
			return err
		}
	}
}

// View runs fn in a read transaction on a reader connection.
func (s *Store) View(ctx context.Context, fn func(store.Tx) error) error {
	return s.run(ctx, s.reader, true, fn)
}

func (s *Store) run(ctx context.Context, db *sql.DB, readOnly bool, fn func(store.Tx) error) error {
	sqlTx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return failure("begin transaction", err)
	}
	t := &tx{ctx: ctx, tx: sqlTx, maxEvents: s.cfg.MaxEvents}
	if err := fn(t); err != nil {
		_ = sqlTx.Rollback()
		return err
	}
	if readOnly {
		return sqlTx.Rollback()
	}
	if err := sqlTx.Commit(); err != nil {
		return failure("commit", err)
	}
	return nil
}

// SQLite result codes Gantry reacts to (primary codes; extended codes
// carry them in their low byte).
const (
	codeBusy       = 5
	codeLocked     = 6
	codeConstraint = 19
)

func sqliteCode(err error) int {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code() & 0xff
	}
	return 0
}

func isBusy(err error) bool {
	c := sqliteCode(err)
	return c == codeBusy || c == codeLocked
}

// failure classifies a database error: a broken constraint is a
// conflict, a cancelled context the caller's, anything else the store's
// own failure.
func failure(op string, err error) error {
	switch {
	case sqliteCode(err) == codeConstraint:
		return fmt.Errorf("%s: %w: %w", op, store.ErrExists, err)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", op, err)
	}
	return store.Unavailable(op, err)
}

var migrations = []string{
	`CREATE TABLE clusters (name TEXT PRIMARY KEY, data TEXT NOT NULL);
	 CREATE TABLE services (name TEXT PRIMARY KEY, cluster TEXT NOT NULL, data TEXT NOT NULL);
	 CREATE TABLE machines (id TEXT PRIMARY KEY, cluster TEXT NOT NULL, live INTEGER NOT NULL, data TEXT NOT NULL);
	 CREATE INDEX machines_cluster ON machines(cluster, live);
	 CREATE TABLE replicas (id TEXT PRIMARY KEY, cluster TEXT NOT NULL, service TEXT NOT NULL, machine TEXT NOT NULL, data TEXT NOT NULL);
	 CREATE INDEX replicas_service ON replicas(service);
	 CREATE INDEX replicas_machine ON replicas(machine);
	 CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, object_kind TEXT NOT NULL, object_name TEXT NOT NULL, data TEXT NOT NULL);
	 CREATE INDEX events_object ON events(object_kind, object_name);
	 CREATE TABLE credentials (machine_id TEXT PRIMARY KEY, hash BLOB NOT NULL);
	 CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);`,
	`ALTER TABLE replicas ADD COLUMN previous_machine TEXT NOT NULL DEFAULT '';
	 CREATE INDEX replicas_previous_machine ON replicas(previous_machine);`,
	`CREATE TABLE memory (key TEXT PRIMARY KEY, value TEXT NOT NULL);`,
}

func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.writer.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)`); err != nil {
		return fmt.Errorf("create migrations table: %w", err)
	}
	var applied int
	if err := s.writer.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&applied); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if applied > len(migrations) {
		return fmt.Errorf("database schema version %d is newer than this gantry (%d): upgrade gantry", applied, len(migrations))
	}
	for v := applied; v < len(migrations); v++ {
		err := s.run(ctx, s.writer, false, func(t store.Tx) error {
			sqlTx := t.(*tx).tx
			if _, err := sqlTx.ExecContext(ctx, migrations[v]); err != nil {
				return err
			}
			_, err := sqlTx.ExecContext(ctx, `INSERT INTO schema_migrations(version) VALUES (?)`, v+1)
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
	}
	return nil
}

func notFound(kind, name string, err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s %q: %w", kind, name, store.ErrNotFound)
	}
	return failure(fmt.Sprintf("read %s %q", kind, name), err)
}
