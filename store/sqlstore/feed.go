package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/store"
)

// Feed is what differs per database in the change feed.
type Feed struct {
	// Lock, when set, makes revisions commit-time ones (deferred.go):
	// a transaction writes its changes under provisional revisions from
	// Provisional, and just before it commits takes Lock, which holds
	// every other committer of changes off until this one has committed,
	// and renumbers them from Next. Revisions then follow commit order
	// (PostgreSQL, whose writers run at once; SQLite has one writer and
	// takes its revisions from Next as it writes).
	Lock string
	// Next returns the next revision; NextN, when set, the next n (its
	// one parameter) in one statement, so that a transaction of 10,000
	// changes holds the feed's lock for one round trip, not 10,000.
	Next  string
	NextN string
	// Provisional returns the next n provisional revisions (its one
	// parameter; negative, so that they never meet a real one), which a
	// transaction draws in growing blocks: one writing 10,000 replicas
	// makes 14 round trips for them, not 10,000.
	Provisional string
	// Notify, when set, runs before the commit of a transaction that
	// wrote changes, to wake other servers' followers.
	Notify string
	// Retention is how long a change is kept.
	Retention time.Duration
	// PruneEvery: every this many revisions, changes older than the
	// retention are pruned.
	PruneEvery int64
	// Now is the clock of the changes' times.
	Now func() time.Time
	// Committed runs after the commit of a transaction that wrote
	// changes.
	Committed func()
}

// DefaultRetention is how long changes are kept unless configured.
const DefaultRetention = 10 * time.Minute

// fedTable is where objects of a kind live, and their key column.
func fedTable(kind string) (table, key string, err error) {
	switch kind {
	case store.FeedCluster:
		return "clusters", "name", nil
	case store.FeedService:
		return "services", "name", nil
	case store.FeedFailoverGroup:
		return "failover_groups", "name", nil
	case store.FeedMachine:
		return "machines", "id", nil
	case store.FeedReplica:
		return "replicas", "id", nil
	case store.FeedMemory:
		return "memory", "key", nil
	}
	return "", "", fmt.Errorf("kind %q is not in the change feed", kind)
}

// nextRevision is the revision of a change being written: the real one,
// or a provisional one renumbered at commit (deferred.go).
func (t *tx) nextRevision() (int64, error) {
	if t.dialect.Feed.deferred() {
		return t.nextProvisional()
	}
	var rev int64
	if err := t.queryRow(t.dialect.Feed.Next).Scan(&rev); err != nil {
		return 0, t.dialect.failure("next revision", err)
	}
	return rev, nil
}

// putFed writes an object of the feed with upsert, which ends in
// RETURNING created_revision (no row: nothing changed, no change is
// recorded); args gives its arguments and the object's document for the
// revision.
func (t *tx) putFed(kind, name, upsert string, args func(rev int64) ([]any, string, error)) error {
	rev, err := t.nextRevision()
	if err != nil {
		return err
	}
	values, data, err := args(rev)
	if err != nil {
		return fmt.Errorf("encode %s %q: %w", kind, name, err)
	}
	var createdAt int64
	switch err := t.queryRow(upsert, values...).Scan(&createdAt); {
	case errors.Is(err, sql.ErrNoRows):
		return nil // the upsert found nothing to change
	case err != nil:
		return t.dialect.failure(fmt.Sprintf("put %s %q", kind, name), err)
	}
	return t.record(store.Change{Revision: rev, Kind: kind, Name: name, Created: createdAt == rev, Data: []byte(data)})
}

// deleteFed deletes an object of the feed with query (… RETURNING data),
// leaving its last state as the tombstone; deleting nothing records
// nothing.
func (t *tx) deleteFed(kind, name, query string) error {
	var data string
	switch err := t.queryRow(query, name).Scan(&data); {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return t.dialect.failure(fmt.Sprintf("delete %s %q", kind, name), err)
	}
	rev, err := t.nextRevision()
	if err != nil {
		return err
	}
	return t.record(store.Change{Revision: rev, Kind: kind, Name: name, Deleted: true, Data: []byte(data)})
}

func (t *tx) record(c store.Change) error {
	f := &t.dialect.Feed
	now := f.Now().UnixNano()
	t.wroteChanges = true
	if f.deferred() {
		// Written to the log at commit, with its final revision.
		c.At = time.Unix(0, now)
		t.provisional = append(t.provisional, c)
		return nil
	}
	if err := t.exec("record change", `INSERT INTO changes(revision, kind, name, created, deleted, data, at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		c.Revision, c.Kind, c.Name, boolInt(c.Created), boolInt(c.Deleted), string(c.Data), now); err != nil {
		return err
	}
	if f.PruneEvery > 0 && c.Revision%f.PruneEvery == 0 {
		t.prune = &pruning{cutoff: now - f.Retention.Nanoseconds(), newest: c.Revision}
	}
	return nil
}

// pruning is a prune of the changes due after a commit: those made
// before cutoff, but not the newest.
type pruning struct{ cutoff, newest int64 }

// pruneAfterCommit prunes what the committed transaction t made due (the
// change log, the events), in a transaction of its own. Inside the
// writer's transaction, the prunes' reads and deletes of the oldest rows
// (and the update of the feed's row) made every writer that crossed a
// pruning boundary conflict with every other one under serializable
// isolation: at 50,000 joining machines, the leader's writes and the
// joins failed on each other. A prune that fails (another server's won
// the race, or the context ended) is left to the next boundary: what it
// would have dropped is only kept longer.
func (d *Dialect) pruneAfterCommit(ctx context.Context, db *sql.DB, opts *sql.TxOptions, t *tx) {
	if t.prune == nil && t.pruneEventsTo <= 0 {
		return
	}
	_ = d.Run(ctx, db, opts, func(st store.Tx) error {
		pt := st.(*tx)
		if t.pruneEventsTo > 0 {
			if err := pt.exec("prune events", `DELETE FROM events WHERE id <= ?`, t.pruneEventsTo); err != nil {
				return err
			}
		}
		if t.prune != nil {
			return pt.pruneChanges(t.prune.cutoff, t.prune.newest)
		}
		return nil
	})
}

// pruneBatch bounds the changes one prune looks at (pruning runs every
// few writes, so a backlog goes in a few of them).
const pruneBatch = 10000

// pruneChanges drops the changes made before cutoff, but never the
// newest (it holds the store's revision), and moves the compacted
// revision up to the last dropped.
func (t *tx) pruneChanges(cutoff, newest int64) error {
	// Changes are kept in revision order, and (but for commits racing on
	// a shared store) in time order too: the oldest tells whether any is
	// due, and the due ones are at the start. Both reads walk the
	// revision index from its start; neither scans the log.
	var oldest int64
	err := t.queryRow(`SELECT at FROM changes ORDER BY revision LIMIT 1`).Scan(&oldest)
	if errors.Is(err, sql.ErrNoRows) || err == nil && oldest >= cutoff {
		return nil
	}
	if err != nil {
		return t.dialect.failure("prune changes", err)
	}
	var last int64
	if err := t.queryRow(`SELECT COALESCE(MAX(revision), 0) FROM (SELECT revision, at FROM changes ORDER BY revision LIMIT ?) AS head WHERE at < ? AND revision < ?`,
		pruneBatch, cutoff, newest).Scan(&last); err != nil {
		return t.dialect.failure("prune changes", err)
	}
	if last == 0 {
		return nil
	}
	if err := t.exec("prune changes", `DELETE FROM changes WHERE revision <= ?`, last); err != nil {
		return err
	}
	return t.exec("prune changes", `UPDATE feed SET compacted = ? WHERE id = 1 AND compacted < ?`, last, last)
}

func (t *tx) Revision() (int64, error) {
	var rev int64
	err := t.queryRow(`SELECT COALESCE(MAX(revision), 0) FROM (SELECT MAX(revision) AS revision FROM changes UNION ALL SELECT compacted FROM feed) AS revisions`).Scan(&rev)
	if err != nil {
		return 0, t.dialect.failure("read revision", err)
	}
	return rev, nil
}

func (t *tx) compacted() (int64, error) {
	var rev int64
	if err := t.queryRow(`SELECT compacted FROM feed WHERE id = 1`).Scan(&rev); err != nil {
		return 0, t.dialect.failure("read compacted revision", err)
	}
	return rev, nil
}

func (t *tx) Changes(f store.ChangeFilter) ([]store.Change, error) {
	compacted, err := t.compacted()
	if err != nil {
		return nil, err
	}
	if f.After < compacted {
		return nil, fmt.Errorf("changes after %d (compacted up to %d): %w", f.After, compacted, store.ErrCompacted)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	query := `SELECT revision, kind, name, created, deleted, data, at FROM changes WHERE revision > ?`
	args := []any{f.After}
	if len(f.Kinds) > 0 {
		query += ` AND kind IN (?` + strings.Repeat(", ?", len(f.Kinds)-1) + `)`
		for _, k := range f.Kinds {
			args = append(args, k)
		}
	}
	rows, err := t.query(query+` ORDER BY revision LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, t.dialect.failure("read changes", err)
	}
	defer rows.Close()
	var out []store.Change
	for rows.Next() {
		var c store.Change
		var created, deleted int
		var data string
		var at int64
		if err := rows.Scan(&c.Revision, &c.Kind, &c.Name, &created, &deleted, &data, &at); err != nil {
			return nil, t.dialect.failure("read changes", err)
		}
		c.Created, c.Deleted, c.Data, c.At = created == 1, deleted == 1, []byte(data), time.Unix(0, at).UTC()
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, t.dialect.failure("read changes", err)
	}
	return out, nil
}

func (t *tx) CheckVersion(kind, name string, rv int64) error {
	table, key, err := fedTable(kind)
	if err != nil {
		return err
	}
	var stored int64
	switch err := t.queryRow(`SELECT revision FROM `+table+` WHERE `+key+` = ?`, name).Scan(&stored); {
	case errors.Is(err, sql.ErrNoRows):
		if rv == 0 {
			return nil
		}
		return fmt.Errorf("%s %q is gone (was at revision %d): %w", kind, name, rv, store.ErrConflict)
	case err != nil:
		return t.dialect.failure(fmt.Sprintf("read %s %q", kind, name), err)
	case rv == 0:
		return fmt.Errorf("%s %q exists (revision %d): %w", kind, name, stored, store.ErrConflict)
	case stored != rv:
		return fmt.Errorf("%s %q is at revision %d, not %d: %w", kind, name, stored, rv, store.ErrConflict)
	}
	return nil
}

// FeedMigration is the schema of the feed for a database whose 64-bit
// integer type is bigint and whose fed tables exist.
func FeedMigration(bigint string) string {
	var b strings.Builder
	for _, table := range []string{"clusters", "services", "failover_groups", "machines", "replicas", "memory"} {
		fmt.Fprintf(&b, "ALTER TABLE %s ADD COLUMN revision %s NOT NULL DEFAULT 0;\n", table, bigint)
		fmt.Fprintf(&b, "ALTER TABLE %s ADD COLUMN created_revision %s NOT NULL DEFAULT 0;\n", table, bigint)
	}
	fmt.Fprintf(&b, `CREATE TABLE changes (revision %[1]s PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL, created INTEGER NOT NULL, deleted INTEGER NOT NULL, data TEXT NOT NULL, at %[1]s NOT NULL);
CREATE INDEX changes_at ON changes(at);
CREATE TABLE feed (id INTEGER PRIMARY KEY, compacted %[1]s NOT NULL);
INSERT INTO feed(id, compacted) VALUES (1, 0);`, bigint)
	return b.String()
}

// ClockOr is now, or the wall clock when now is nil.
func ClockOr(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}
