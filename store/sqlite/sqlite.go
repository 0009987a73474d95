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
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Config tunes the store.
type Config struct {
	// Path of the database file.
	Path string
	// BusyTimeout is how long a writer waits for the lock.
	BusyTimeout time.Duration
	// MaxEvents bounds the event table; older events are pruned.
	MaxEvents int
}

// DefaultConfig returns the defaults for a path.
func DefaultConfig(path string) Config {
	return Config{Path: path, BusyTimeout: 5 * time.Second, MaxEvents: 10000}
}

// Store is the SQLite Store.
type Store struct {
	db        *sql.DB
	maxEvents int
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) and migrates the database.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Add("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+cfg.Path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", cfg.Path, err)
	}
	// One connection: SQLite has one writer anyway, and this way reads see
	// every committed write without cross-connection surprises.
	db.SetMaxOpenConns(1)
	s := &Store{db: db, maxEvents: cfg.MaxEvents}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Update runs fn in a write transaction.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.run(ctx, false, fn)
}

// View runs fn in a read transaction.
func (s *Store) View(ctx context.Context, fn func(store.Tx) error) error {
	return s.run(ctx, true, fn)
}

func (s *Store) run(ctx context.Context, readOnly bool, fn func(store.Tx) error) error {
	sqlTx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	t := &tx{ctx: ctx, tx: sqlTx, maxEvents: s.maxEvents}
	if err := fn(t); err != nil {
		_ = sqlTx.Rollback()
		return err
	}
	if readOnly {
		return sqlTx.Rollback()
	}
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
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
}

func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)`); err != nil {
		return fmt.Errorf("create migrations table: %w", err)
	}
	var applied int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&applied); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if applied > len(migrations) {
		return fmt.Errorf("database schema version %d is newer than this gantry (%d): upgrade gantry", applied, len(migrations))
	}
	for v := applied; v < len(migrations); v++ {
		err := s.run(ctx, false, func(t store.Tx) error {
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
	return fmt.Errorf("read %s %q: %w", kind, name, err)
}
