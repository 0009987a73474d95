// Package postgres is the Store that several servers share: PostgreSQL
// through pgx, serializable transactions retried when they lose a race,
// and the leader lease whose epoch fences every write of the leader.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// Config tunes the store.
type Config struct {
	// URL is the connection string (postgres://user:pass@host:port/db).
	URL string
	// MaxConns bounds the connection pool.
	MaxConns int
	// LeaseConns bounds the leader lease's own pool: a renewal never
	// waits for a connection behind the server's other transactions (at
	// 10,000 machines, heartbeats queued on the change feed's lock held
	// every pooled connection, and the leader's renewals timed out).
	LeaseConns int
	// MaxWriters bounds the write transactions that run at once; the
	// others wait their turn before they begin (0: only MaxConns bounds
	// them). Every write with changes takes the change feed's lock before
	// its commit, so writers beyond a few add nothing but contention: 32
	// writers at once committed 105 times a second unbounded and 421 times
	// bounded to 4 (BenchmarkConcurrentFeedWrites).
	MaxWriters int
	// SerializationRetries is how many times a write transaction that
	// lost a serialization race is run again.
	SerializationRetries int
	// RetryBackoff is the longest first wait before such a retry; it
	// doubles per attempt, with jitter so that the losers spread out.
	RetryBackoff time.Duration
	// MaxEvents bounds the event table; older events are pruned.
	MaxEvents int
	// IdleInTransactionTimeout ends a session that holds a transaction
	// open without a statement this long (a paused or partitioned
	// server): its locks would otherwise keep the next leader waiting.
	// Keep it well under the leader lease.
	IdleInTransactionTimeout time.Duration
	// ChangeRetention is how long the change feed keeps a change (and a
	// deletion's tombstone).
	ChangeRetention time.Duration
	// Now is the clock of the changes' times (nil: the wall clock).
	Now func() time.Time
	// ListenRetry is the wait before the change listener connects again
	// after it lost its connection.
	ListenRetry time.Duration
	// LeaseWarmInterval is how often the lease pool is checked for an
	// open connection, and one opened (within ConnectTimeout) when it
	// has none (0: never; a lease call then opens its own).
	LeaseWarmInterval time.Duration
	// ConnectTimeout bounds the opening of the lease pool's connections.
	// A lease call is as short as the elector's retry period; a
	// connection that takes longer to open (a loaded database forks and
	// authenticates a backend slowly) would never open within one, and no
	// follower could ever take the lease over.
	ConnectTimeout time.Duration
}

// DefaultConfig returns the defaults for a connection string.
func DefaultConfig(url string) Config {
	return Config{URL: url, MaxConns: 16, LeaseConns: 2, MaxWriters: 4, SerializationRetries: 30, RetryBackoff: 2 * time.Millisecond, MaxEvents: 10000,
		IdleInTransactionTimeout: 5 * time.Second, ChangeRetention: sqlstore.DefaultRetention, ListenRetry: time.Second,
		LeaseWarmInterval: time.Second, ConnectTimeout: 10 * time.Second}
}

// Store is the PostgreSQL Store.
type Store struct {
	db *sql.DB
	// leases is the lease's own pool (Config.LeaseConns).
	leases  *sql.DB
	cfg     Config
	dialect *sqlstore.Dialect
	changed store.Broadcast
	// stopListening ends the change listener and the lease pool's
	// warming; listening and warming are done when they have.
	stopListening context.CancelFunc
	listening     chan struct{}
	warming       chan struct{}
	// writers holds a slot per write transaction under way (nil: no
	// bound); waiting counts those waiting for one.
	writers chan struct{}
	waiting atomic.Int64
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Leases = (*Store)(nil)
)

// migrationLock keeps servers that start together from migrating at once.
const migrationLock = `SELECT pg_advisory_xact_lock(7400740074007400)`

// The change feed: a transaction writes its changes under provisional
// revisions and, just before it commits, takes feedLock (held until the
// commit) to renumber them from the sequence, so revisions follow commit
// order; a commit with changes notifies changesChannel.
const (
	feedLock       = `SELECT pg_advisory_xact_lock(7400740074007401)`
	changesChannel = "gantry_changes"
	// marksLock is held from a heartbeats' write's drawing of its mark to
	// its commit (sqlstore.LivenessMarks; the trigger of the migration
	// below takes it too). Taken before the feed's lock by a transaction
	// that holds both.
	marksLock = `SELECT pg_advisory_xact_lock(7400740074007402)`
)

var migrations = []string{
	`CREATE TABLE clusters (name TEXT PRIMARY KEY, data TEXT NOT NULL);
	 CREATE TABLE services (name TEXT PRIMARY KEY, cluster TEXT NOT NULL, data TEXT NOT NULL);
	 CREATE TABLE machines (id TEXT PRIMARY KEY, cluster TEXT NOT NULL, live INTEGER NOT NULL, subnet TEXT, launch_key TEXT, data TEXT NOT NULL);
	 CREATE INDEX machines_cluster ON machines(cluster, live);
	 CREATE UNIQUE INDEX machines_live_subnet ON machines(cluster, subnet);
	 CREATE UNIQUE INDEX machines_launch_key ON machines(launch_key);
	 CREATE TABLE replicas (id TEXT PRIMARY KEY, cluster TEXT NOT NULL, service TEXT NOT NULL, machine TEXT NOT NULL, previous_machine TEXT NOT NULL DEFAULT '', data TEXT NOT NULL);
	 CREATE INDEX replicas_service ON replicas(service);
	 CREATE INDEX replicas_machine ON replicas(machine);
	 CREATE INDEX replicas_previous_machine ON replicas(previous_machine);
	 CREATE TABLE events (id BIGSERIAL PRIMARY KEY, object_kind TEXT NOT NULL, object_name TEXT NOT NULL, data TEXT NOT NULL);
	 CREATE INDEX events_object ON events(object_kind, object_name);
	 CREATE TABLE credentials (machine_id TEXT PRIMARY KEY, hash BYTEA NOT NULL);
	 CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
	 CREATE TABLE memory (key TEXT PRIMARY KEY, value TEXT NOT NULL);
	 CREATE TABLE leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL, epoch BIGINT NOT NULL, expires_at TIMESTAMPTZ NOT NULL);`,
	`CREATE TABLE liveness (machine_id TEXT PRIMARY KEY, at BIGINT NOT NULL);`,
	`CREATE TABLE tokens (id TEXT PRIMARY KEY, hash BYTEA NOT NULL, data TEXT NOT NULL);`,
	`CREATE TABLE secrets (name TEXT PRIMARY KEY, data TEXT NOT NULL, sealed TEXT NOT NULL);`,
	`CREATE TABLE failover_groups (name TEXT PRIMARY KEY, data TEXT NOT NULL);`,
	`CREATE SEQUENCE revisions;
	 CREATE SEQUENCE provisional_revisions;
	` + sqlstore.FeedMigration("BIGINT") + `
	 CREATE INDEX clusters_revision ON clusters(revision);
	 CREATE INDEX services_revision ON services(revision);
	 CREATE INDEX failover_groups_revision ON failover_groups(revision);
	 CREATE INDEX machines_revision ON machines(revision);
	 CREATE INDEX replicas_revision ON replicas(revision);
	 CREATE INDEX memory_revision ON memory(revision);`,
	// Replicas list in pages by service and id.
	`DROP INDEX replicas_service;
	 CREATE INDEX replicas_service_id ON replicas(service, id);`,
	// Heartbeats' writes are marked, so that a view reads those since
	// the last it saw (sqlstore.LivenessMarks). A server of an older
	// version writes none: the triggers mark its rows, under the same
	// lock and from the same sequence (a row a newer server marked is
	// left to it: a trigger per row costs half a write again).
	`ALTER TABLE liveness ADD COLUMN mark BIGINT NOT NULL DEFAULT 0;
	 CREATE INDEX liveness_mark ON liveness(mark);
	 CREATE SEQUENCE liveness_marks;
	 CREATE FUNCTION liveness_mark() RETURNS trigger LANGUAGE plpgsql AS $$
	 BEGIN
	   PERFORM pg_advisory_xact_lock(7400740074007402);
	   NEW.mark := nextval('liveness_marks');
	   RETURN NEW;
	 END $$;
	 CREATE TRIGGER liveness_mark_insert BEFORE INSERT ON liveness
	   FOR EACH ROW WHEN (NEW.mark = 0) EXECUTE FUNCTION liveness_mark();
	 CREATE TRIGGER liveness_mark_update BEFORE UPDATE OF at ON liveness
	   FOR EACH ROW WHEN (NEW.mark = OLD.mark) EXECUTE FUNCTION liveness_mark();`,
}

// Open connects and migrates the database.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	conn, err := pgx.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if cfg.IdleInTransactionTimeout > 0 {
		conn.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(cfg.IdleInTransactionTimeout.Milliseconds(), 10)
	}
	db := stdlib.OpenDB(*conn)
	db.SetMaxOpenConns(max(cfg.MaxConns, 2))
	// database/sql keeps 2 idle connections unless told: under load every
	// other query would open a connection (a PostgreSQL backend fork).
	db.SetMaxIdleConns(max(cfg.MaxConns, 2))
	leases := stdlib.OpenDB(*conn)
	leases.SetMaxOpenConns(max(cfg.LeaseConns, 1))
	leases.SetMaxIdleConns(max(cfg.LeaseConns, 1))
	s := &Store{db: db, leases: leases, cfg: cfg}
	if cfg.MaxWriters > 0 {
		s.writers = make(chan struct{}, cfg.MaxWriters)
	}
	s.dialect = &sqlstore.Dialect{NumberedParams: true, IsConflict: isConflict, MaxEvents: cfg.MaxEvents, WriteBehind: &sqlstore.WriteBehind{Replicas: replicasBehind, Events: eventsBehind}, Feed: sqlstore.Feed{
		Lock:        feedLock,
		Next:        `SELECT nextval('revisions')`,
		NextN:       `SELECT nextval('revisions') FROM generate_series(1, ?)`,
		Provisional: `SELECT -nextval('provisional_revisions') FROM generate_series(1, ?)`,
		Notify:      `SELECT pg_notify('` + changesChannel + `', '')`,
		Retention:   cfg.ChangeRetention,
		PruneEvery:  100,
		Now:         sqlstore.ClockOr(cfg.Now),
		Committed:   s.changed.Fire,
	}, Marks: sqlstore.LivenessMarks{Lock: marksLock, Next: `SELECT nextval('liveness_marks')`}}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		leases.Close()
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	if err := s.dialect.Migrate(ctx, db, migrationLock, migrations); err != nil {
		db.Close()
		leases.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	listenCtx, stop := context.WithCancel(context.Background())
	s.stopListening, s.listening, s.warming = stop, make(chan struct{}), make(chan struct{})
	go s.listen(listenCtx, *conn)
	go s.keepLeaseConnWarm(listenCtx)
	return s, nil
}

// keepLeaseConnWarm keeps a connection open in the lease pool, each
// opened within ConnectTimeout rather than a lease call's deadline (see
// Config.ConnectTimeout), until ctx ends.
func (s *Store) keepLeaseConnWarm(ctx context.Context) {
	defer close(s.warming)
	if s.cfg.LeaseWarmInterval <= 0 || s.cfg.ConnectTimeout <= 0 {
		return
	}
	ticker := time.NewTicker(s.cfg.LeaseWarmInterval)
	defer ticker.Stop()
	for {
		pingCtx, cancel := context.WithTimeout(ctx, s.cfg.ConnectTimeout)
		_ = s.leases.PingContext(pingCtx) // a failure is the lease call's to report
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// Changed implements store.Notifier: commits of this server fire at
// once, other servers' through PostgreSQL's notifications.
func (s *Store) Changed() <-chan struct{} { return s.changed.Changed() }

// Fired implements store.Notifier.
func (s *Store) Fired() uint64 { return s.changed.Fired() }

// listen follows the notifications of other servers' commits on a
// connection of its own, until ctx ends. Losing the connection wakes the
// followers too (they read the revision again), since a notification may
// have been missed meanwhile.
func (s *Store) listen(ctx context.Context, cfg pgx.ConnConfig) {
	defer close(s.listening)
	for ctx.Err() == nil {
		if err := s.listenOnce(ctx, &cfg); err != nil && ctx.Err() == nil {
			s.changed.Fire()
			select {
			case <-ctx.Done():
			case <-time.After(s.cfg.ListenRetry):
			}
		}
	}
}

func (s *Store) listenOnce(ctx context.Context, cfg *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+changesChannel); err != nil {
		return err
	}
	s.changed.Fire() // changes committed before LISTEN would be missed
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		s.changed.Fire()
	}
}

// Close stops the change listener and closes the connection pool.
func (s *Store) Close() error {
	s.stopListening()
	<-s.listening
	<-s.warming
	err := errors.Join(s.db.Close(), s.leases.Close())
	s.dialect.Closed()
	return err
}

// Update runs fn in a serializable transaction, again when it lost a
// serialization race or a deadlock to another writer.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	if s.writers != nil {
		s.waiting.Add(1)
		select {
		case s.writers <- struct{}{}:
			s.waiting.Add(-1)
			defer func() { <-s.writers }()
		case <-ctx.Done():
			s.waiting.Add(-1)
			return ctx.Err()
		}
	}
	opts := &sql.TxOptions{Isolation: sql.LevelSerializable}
	for attempt := 0; ; attempt++ {
		err := s.dialect.Run(ctx, s.db, opts, func(t store.Tx) error { return fn(s.leaseTx(ctx, t)) })
		if !retryable(err) || attempt >= s.cfg.SerializationRetries || ctx.Err() != nil {
			return err
		}
		wait := s.cfg.RetryBackoff << min(attempt, 5)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(rand.N(wait + 1)):
		}
	}
}

// WaitingWriters is how many write transactions wait for their turn
// (MaxWriters).
func (s *Store) WaitingWriters() int { return int(s.waiting.Load()) }

// View runs fn in a read-only snapshot: it never waits for a writer.
func (s *Store) View(ctx context.Context, fn func(store.Tx) error) error {
	opts := &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
	return s.dialect.Run(ctx, s.db, opts, fn)
}

// replicasBehind and eventsBehind send a transaction's replica writes and
// events in one statement each (sqlstore's write-behind); the events are
// inserted, and their ids returned, in the arrays' order.
const (
	replicasBehind = `INSERT INTO replicas(id, cluster, service, machine, previous_machine, data, revision, created_revision)
		SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::bigint[])
		ON CONFLICT(id) DO UPDATE SET cluster = excluded.cluster, service = excluded.service, machine = excluded.machine,
			previous_machine = excluded.previous_machine, data = excluded.data, revision = excluded.revision
		RETURNING id, created_revision`
	eventsBehind = `INSERT INTO events(object_kind, object_name, data)
		SELECT e.object_kind, e.object_name, e.data FROM unnest(?::text[], ?::text[], ?::text[]) WITH ORDINALITY AS e(object_kind, object_name, data, n)
		ORDER BY e.n
		RETURNING id`
)

// SQLSTATE codes Gantry reacts to.
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
)

func sqlState(err error) string {
	var e *pgconn.PgError
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func isConflict(err error) bool { return sqlState(err) == codeUniqueViolation }

func retryable(err error) bool {
	c := sqlState(err)
	return c == codeSerializationFailure || c == codeDeadlockDetected
}
