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
	"os"
	"time"

	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/sqlstore"
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
	// ChangeRetention is how long the change feed keeps a change (and a
	// deletion's tombstone).
	ChangeRetention time.Duration
	// Now is the clock of the changes' times (nil: the wall clock).
	Now func() time.Time
}

// DefaultConfig returns the defaults for a path.
func DefaultConfig(path string) Config {
	return Config{Path: path, BusyTimeout: 5 * time.Second, MaxEvents: 10000, Readers: 4, BusyRetries: 3,
		ChangeRetention: sqlstore.DefaultRetention}
}

// Store is the SQLite Store: one writer connection, and a pool of
// read-only connections that WAL lets read while the writer writes.
type Store struct {
	writer, reader *sql.DB
	cfg            Config
	dialect        *sqlstore.Dialect
	changed        store.Broadcast
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) and migrates the database.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := ownerOnly(cfg.Path); err != nil {
		return nil, err
	}
	writer, err := openDB(cfg, false)
	if err != nil {
		return nil, err
	}
	// One writer: SQLite has one anyway, and this way writes queue here
	// instead of failing busy.
	writer.SetMaxOpenConns(1)
	s := &Store{writer: writer, cfg: cfg}
	s.dialect = &sqlstore.Dialect{IsConflict: isConflict, MaxEvents: cfg.MaxEvents, Feed: sqlstore.Feed{
		// One writer: the next revision is the newest one's successor.
		Next:       `SELECT COALESCE(MAX(revision), 0) + 1 FROM changes`,
		Retention:  cfg.ChangeRetention,
		PruneEvery: 100,
		Now:        sqlstore.ClockOr(cfg.Now),
		Committed:  s.changed.Fire,
	}, Marks: sqlstore.LivenessMarks{
		// One writer: the next mark is the newest one's successor.
		Next: `SELECT COALESCE(MAX(mark), 0) + 1 FROM liveness`,
	}}
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

// ownerOnly creates the database file, or narrows an existing one, to
// mode 0600 whatever the umask and the directory's mode: it holds
// credentials' hashes and server secrets. SQLite gives its WAL and
// shared-memory files the database file's mode.
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open sqlite %s: %w", path, err)
	}
	defer f.Close()
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("chmod sqlite %s: %w", path, err)
	}
	return nil
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
	err = errors.Join(err, s.writer.Close())
	s.dialect.Closed()
	return err
}

// Changed implements store.Notifier.
func (s *Store) Changed() <-chan struct{} { return s.changed.Changed() }

// Fired implements store.Notifier.
func (s *Store) Fired() uint64 { return s.changed.Fired() }

// Update runs fn in a write transaction, again when the database was
// locked by another process.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	for attempt := 0; ; attempt++ {
		err := s.dialect.Run(ctx, s.writer, nil, fn)
		if !isBusy(err) || attempt >= s.cfg.BusyRetries || ctx.Err() != nil {
			return err
		}
	}
}

// View runs fn in a read transaction on a reader connection.
func (s *Store) View(ctx context.Context, fn func(store.Tx) error) error {
	return s.dialect.Run(ctx, s.reader, &sql.TxOptions{ReadOnly: true}, fn)
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

func isConflict(err error) bool { return sqliteCode(err) == codeConstraint }

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
	// A live machine's /24 and every launched machine's launch key are
	// unique: the store holds them, not a check before the insert.
	`ALTER TABLE machines ADD COLUMN subnet TEXT;
	 ALTER TABLE machines ADD COLUMN launch_key TEXT;
	 UPDATE machines SET
	   subnet = CASE WHEN live = 1 AND json_extract(data, '$.subnet') <> '' THEN json_extract(data, '$.subnet') END,
	   launch_key = CASE WHEN json_extract(data, '$.launchKey') NOT IN ('', 'manual') THEN json_extract(data, '$.launchKey') END;
	 CREATE UNIQUE INDEX machines_live_subnet ON machines(cluster, subnet);
	 CREATE UNIQUE INDEX machines_launch_key ON machines(launch_key);`,
	`CREATE TABLE liveness (machine_id TEXT PRIMARY KEY, at INTEGER NOT NULL);`,
	`CREATE TABLE tokens (id TEXT PRIMARY KEY, hash BLOB NOT NULL, data TEXT NOT NULL);`,
	`CREATE TABLE secrets (name TEXT PRIMARY KEY, data TEXT NOT NULL, sealed TEXT NOT NULL);`,
	`CREATE TABLE failover_groups (name TEXT PRIMARY KEY, data TEXT NOT NULL);`,
	sqlstore.FeedMigration("INTEGER"),
	// Replicas list in pages by service and id.
	`DROP INDEX replicas_service;
	 CREATE INDEX replicas_service_id ON replicas(service, id);`,
	// Heartbeats' writes are marked, so that a view reads those since
	// the last it saw.
	`ALTER TABLE liveness ADD COLUMN mark INTEGER NOT NULL DEFAULT 0;
	 CREATE INDEX liveness_mark ON liveness(mark);`,
}

func (s *Store) migrate(ctx context.Context) error {
	return s.dialect.Migrate(ctx, s.writer, "", migrations)
}
