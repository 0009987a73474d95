package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
)

type tx struct {
	ctx       context.Context
	db        *sql.DB
	tx        *sql.Tx
	dialect   *Dialect
	maxEvents int
	// wroteChanges: this transaction wrote to the change feed.
	wroteChanges bool
	// provisional are its changes to renumber at commit (deferred.go).
	provisional []store.Change
	// provisionals are provisional revisions drawn and not yet used;
	// provisionalBlock the size of the last block drawn.
	provisionals     []int64
	provisionalBlock int
	// prune, when set, is the pruning of the change log due once this
	// transaction commits; pruneEventsTo, when positive, the last event
	// to prune then.
	prune         *pruning
	pruneEventsTo int64
	// behind are the writes held back (writebehind.go).
	behind writeBehind
}

// errRow is a row whose query was not sent.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// run sends query as it is (nothing held back is sent first).
func (t *tx) run(query string, args ...any) (*sql.Rows, error) {
	q := t.dialect.rebind(query)
	if s := t.dialect.statement(t.db, q); s != nil {
		return t.tx.StmtContext(t.ctx, s).QueryContext(t.ctx, args...)
	}
	return t.tx.QueryContext(t.ctx, q, args...)
}

func (t *tx) query(query string, args ...any) (*sql.Rows, error) {
	if err := t.flushFor(query); err != nil {
		return nil, err
	}
	return t.run(query, args...)
}

func (t *tx) queryRow(query string, args ...any) rowScanner {
	if err := t.flushFor(query); err != nil {
		return errRow{err}
	}
	q := t.dialect.rebind(query)
	if s := t.dialect.statement(t.db, q); s != nil {
		return t.tx.StmtContext(t.ctx, s).QueryRowContext(t.ctx, args...)
	}
	return t.tx.QueryRowContext(t.ctx, q, args...)
}

type rowScanner interface{ Scan(dest ...any) error }

func getJSON[T any](t *tx, kind, name, query string, args ...any) (*T, error) {
	var data string
	if err := t.queryRow(query, args...).Scan(&data); err != nil {
		return nil, t.dialect.notFound(kind, name, err)
	}
	var v T
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		return nil, fmt.Errorf("decode %s %q: %w", kind, name, err)
	}
	return &v, nil
}

func listJSON[T any](t *tx, kind, query string, args ...any) ([]*T, error) {
	rows, err := t.query(query, args...)
	if err != nil {
		return nil, t.dialect.failure("list "+kind, err)
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, t.dialect.failure("list "+kind, err)
		}
		var v T
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			return nil, fmt.Errorf("decode %s: %w", kind, err)
		}
		out = append(out, &v)
	}
	if err := rows.Err(); err != nil {
		return nil, t.dialect.failure("list "+kind, err)
	}
	return out, nil
}

func (t *tx) exec(what, query string, args ...any) error {
	if err := t.flushFor(query); err != nil {
		return err
	}
	q := t.dialect.rebind(query)
	var err error
	if s := t.dialect.statement(t.db, q); s != nil {
		_, err = t.tx.StmtContext(t.ctx, s).ExecContext(t.ctx, args...)
	} else {
		_, err = t.tx.ExecContext(t.ctx, q, args...)
	}
	if err != nil {
		return t.dialect.failure(what, err)
	}
	return nil
}

func encode(v any) (string, error) {
	data, err := json.Marshal(v)
	return string(data), err
}

func (t *tx) GetCluster(name string) (*api.Cluster, error) {
	return getJSON[api.Cluster](t, "cluster", name, `SELECT data FROM clusters WHERE name = ?`, name)
}

func (t *tx) ListClusters() ([]*api.Cluster, error) {
	return listJSON[api.Cluster](t, "clusters", `SELECT data FROM clusters ORDER BY name`)
}

func (t *tx) PutCluster(c *api.Cluster) error {
	return t.putNamed(store.FeedCluster, "clusters", c.Metadata.Name, func(rev int64) any {
		v := *c
		v.Metadata.ResourceVersion = rev
		return &v
	})
}

// putNamed writes an object of a table of names and documents; at gives
// the object (a copy) at a revision.
func (t *tx) putNamed(kind, table, name string, at func(rev int64) any) error {
	return t.putFed(kind, name,
		`INSERT INTO `+table+`(name, data, revision, created_revision) VALUES (?, ?, ?, ?)
		 ON CONFLICT(name) DO UPDATE SET data = excluded.data, revision = excluded.revision RETURNING created_revision`,
		func(rev int64) ([]any, string, error) {
			data, err := encode(at(rev))
			return []any{name, data, rev, rev}, data, err
		})
}

func (t *tx) DeleteCluster(name string) error {
	return t.deleteFed(store.FeedCluster, name, `DELETE FROM clusters WHERE name = ? RETURNING data`)
}

func (t *tx) GetService(name string) (*api.Service, error) {
	return getJSON[api.Service](t, "service", name, `SELECT data FROM services WHERE name = ?`, name)
}

func (t *tx) ListServices() ([]*api.Service, error) {
	return listJSON[api.Service](t, "services", `SELECT data FROM services ORDER BY name`)
}

func (t *tx) PutService(s *api.Service) error {
	return t.putFed(store.FeedService, s.Metadata.Name,
		`INSERT INTO services(name, cluster, data, revision, created_revision) VALUES (?, ?, ?, ?, ?)
		 ON CONFLICT(name) DO UPDATE SET cluster = excluded.cluster, data = excluded.data, revision = excluded.revision RETURNING created_revision`,
		func(rev int64) ([]any, string, error) {
			v := *s
			v.Metadata.ResourceVersion = rev
			data, err := encode(&v)
			return []any{s.Metadata.Name, s.Spec.Cluster, data, rev, rev}, data, err
		})
}

func (t *tx) DeleteService(name string) error {
	return t.deleteFed(store.FeedService, name, `DELETE FROM services WHERE name = ? RETURNING data`)
}

func (t *tx) GetFailoverGroup(name string) (*api.FailoverGroup, error) {
	return getJSON[api.FailoverGroup](t, "failover group", name, `SELECT data FROM failover_groups WHERE name = ?`, name)
}

func (t *tx) ListFailoverGroups() ([]*api.FailoverGroup, error) {
	return listJSON[api.FailoverGroup](t, "failover groups", `SELECT data FROM failover_groups ORDER BY name`)
}

func (t *tx) PutFailoverGroup(g *api.FailoverGroup) error {
	return t.putNamed(store.FeedFailoverGroup, "failover_groups", g.Metadata.Name, func(rev int64) any {
		v := *g
		v.Metadata.ResourceVersion = rev
		return &v
	})
}

func (t *tx) DeleteFailoverGroup(name string) error {
	return t.deleteFed(store.FeedFailoverGroup, name, `DELETE FROM failover_groups WHERE name = ? RETURNING data`)
}

func (t *tx) CreateMachine(m *api.Machine) error {
	return t.putFed(store.FeedMachine, m.ID,
		`INSERT INTO machines(id, cluster, live, subnet, launch_key, data, revision, created_revision) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING created_revision`,
		machineRow(m))
}

func (t *tx) PutMachine(m *api.Machine) error {
	return t.putFed(store.FeedMachine, m.ID,
		`INSERT INTO machines(id, cluster, live, subnet, launch_key, data, revision, created_revision) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		 ON CONFLICT(id) DO UPDATE SET cluster = excluded.cluster, live = excluded.live, subnet = excluded.subnet, launch_key = excluded.launch_key, data = excluded.data, revision = excluded.revision
		 RETURNING created_revision`,
		machineRow(m))
}

func machineRow(m *api.Machine) func(rev int64) ([]any, string, error) {
	return func(rev int64) ([]any, string, error) {
		v := *m
		v.ResourceVersion = rev
		data, err := encode(&v)
		return append(machineColumns(&v, data), rev, rev), data, err
	}
}

func (t *tx) GetReplica(id string) (*api.Replica, error) {
	return getJSON[api.Replica](t, "replica", id, `SELECT data FROM replicas WHERE id = ?`, id)
}

const replicasWhere = `(? = '' OR cluster = ?) AND (? = '' OR service = ?) AND (? = '' OR machine = ?) AND (? = '' OR previous_machine = ?)`

func replicasWhereArgs(f store.ReplicaFilter) []any {
	return []any{f.Cluster, f.Cluster, f.Service, f.Service, f.Machine, f.Machine, f.PreviousMachine, f.PreviousMachine}
}

func (t *tx) ListReplicas(f store.ReplicaFilter) ([]*api.Replica, error) {
	query := `SELECT data FROM replicas WHERE ` + replicasWhere
	args := replicasWhereArgs(f)
	if len(f.After) == 2 {
		query += ` AND (service > ? OR (service = ? AND id > ?))`
		args = append(args, f.After[0], f.After[0], f.After[1])
	}
	query += ` ORDER BY service, id`
	if f.Limit > 0 {
		query += ` LIMIT ? OFFSET ?`
		args = append(args, f.Limit, f.Offset)
	}
	return listJSON[api.Replica](t, "replicas", query, args...)
}

func (t *tx) CountReplicas(f store.ReplicaFilter) (int, error) {
	var n int
	if err := t.queryRow(`SELECT COUNT(*) FROM replicas WHERE `+replicasWhere, replicasWhereArgs(f)...).Scan(&n); err != nil {
		return 0, t.dialect.failure("count replicas", err)
	}
	return n, nil
}

func (t *tx) PutReplica(r *api.Replica) error {
	if t.writesBehind() {
		return t.putReplicaBehind(r)
	}
	return t.putFed(store.FeedReplica, r.ID,
		`INSERT INTO replicas(id, cluster, service, machine, previous_machine, data, revision, created_revision) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		 ON CONFLICT(id) DO UPDATE SET cluster = excluded.cluster, service = excluded.service, machine = excluded.machine, previous_machine = excluded.previous_machine, data = excluded.data, revision = excluded.revision
		 RETURNING created_revision`,
		func(rev int64) ([]any, string, error) {
			v := *r
			v.ResourceVersion = rev
			data, err := encode(&v)
			return []any{r.ID, r.Cluster, r.Service, r.Machine, r.PreviousMachine, data, rev, rev}, data, err
		})
}

func (t *tx) DeleteReplica(id string) error {
	return t.deleteFed(store.FeedReplica, id, `DELETE FROM replicas WHERE id = ? RETURNING data`)
}

func (t *tx) AddEvent(e *api.Event) error {
	if t.writesBehind() {
		return t.addEventBehind(e)
	}
	data, err := encode(e)
	if err != nil {
		return err
	}
	if err := t.queryRow(`INSERT INTO events(object_kind, object_name, data) VALUES (?, ?, ?) RETURNING id`, e.ObjectKind, e.ObjectName, data).Scan(&e.ID); err != nil {
		return t.dialect.failure("add event", err)
	}
	t.eventsAdded(e.ID, e.ID)
	return nil
}

// eventsAdded notes the events first to last added: every 100 events,
// the oldest beyond MaxEvents are pruned after the commit
// (pruneAfterCommit).
func (t *tx) eventsAdded(first, last int64) {
	if t.maxEvents > 0 && last/100 != (first-1)/100 {
		t.pruneEventsTo = last/100*100 - int64(t.maxEvents)
	}
}

func (t *tx) ListEvents(f store.EventFilter) ([]*api.Event, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	// Newest `limit` matching events, returned oldest first.
	rows, err := t.query(
		`SELECT id, data FROM (SELECT id, data FROM events WHERE (? = '' OR object_kind = ?) AND (? = '' OR object_name = ?) AND id > ? ORDER BY id DESC LIMIT ?) AS newest ORDER BY id`,
		f.ObjectKind, f.ObjectKind, f.ObjectName, f.ObjectName, f.AfterID, limit)
	if err != nil {
		return nil, t.dialect.failure("list events", err)
	}
	defer rows.Close()
	var out []*api.Event
	for rows.Next() {
		var id int64
		var data string
		if err := rows.Scan(&id, &data); err != nil {
			return nil, t.dialect.failure("list events", err)
		}
		var e api.Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return nil, fmt.Errorf("decode event: %w", err)
		}
		e.ID = id
		out = append(out, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, t.dialect.failure("list events", err)
	}
	return out, nil
}

func (t *tx) GetCredentialHash(machineID string) ([]byte, error) {
	var hash []byte
	if err := t.queryRow(`SELECT hash FROM credentials WHERE machine_id = ?`, machineID).Scan(&hash); err != nil {
		return nil, t.dialect.notFound("credential", machineID, err)
	}
	return hash, nil
}

func (t *tx) PutCredentialHash(machineID string, hash []byte) error {
	return t.exec("put credential", `INSERT INTO credentials(machine_id, hash) VALUES (?, ?) ON CONFLICT(machine_id) DO UPDATE SET hash = excluded.hash`, machineID, hash)
}

func (t *tx) GetMeta(key string) (string, error) {
	var v string
	if err := t.queryRow(`SELECT value FROM meta WHERE key = ?`, key).Scan(&v); err != nil {
		return "", t.dialect.notFound("meta", key, err)
	}
	return v, nil
}

func (t *tx) PutMeta(key, value string) error {
	return t.exec("put meta", `INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, key, value)
}

func (t *tx) ListMetaPrefix(prefix string) (map[string]string, error) {
	return t.keyValues("list meta", `SELECT key, value FROM meta WHERE substr(key, 1, length(?)) = ?`, prefix)
}

func (t *tx) DeleteMeta(key string) error {
	return t.exec("delete meta", `DELETE FROM meta WHERE key = ?`, key)
}

func (t *tx) ListMemory() (map[string]string, error) { return t.ListMemoryPrefix("") }

func (t *tx) ListMemoryPrefix(prefix string) (map[string]string, error) {
	return t.keyValues("list memory", `SELECT key, value FROM memory WHERE substr(key, 1, length(?)) = ?`, prefix)
}

// keyValues reads the key and value rows of query, given prefix twice.
func (t *tx) keyValues(op, query, prefix string) (map[string]string, error) {
	rows, err := t.query(query, prefix, prefix)
	if err != nil {
		return nil, t.dialect.failure(op, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, t.dialect.failure(op, err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, t.dialect.failure(op, err)
	}
	return out, nil
}

func (t *tx) GetMemory(key string) (string, error) {
	var v string
	if err := t.queryRow(`SELECT value FROM memory WHERE key = ?`, key).Scan(&v); err != nil {
		return "", t.dialect.notFound("memory", key, err)
	}
	return v, nil
}

// PutMemory writes an entry; writing the value it holds is no change.
func (t *tx) PutMemory(key, value string) error {
	return t.putFed(store.FeedMemory, key,
		`INSERT INTO memory(key, value, revision, created_revision) VALUES (?, ?, ?, ?)
		 ON CONFLICT(key) DO UPDATE SET value = excluded.value, revision = excluded.revision WHERE memory.value <> excluded.value
		 RETURNING created_revision`,
		func(rev int64) ([]any, string, error) { return []any{key, value, rev, rev}, value, nil })
}

func (t *tx) DeleteMemory(key string) error {
	return t.deleteFed(store.FeedMemory, key, `DELETE FROM memory WHERE key = ? RETURNING value`)
}

// machineColumns are the indexed columns of a machine row: the unique
// indexes on them hold one live machine per /24 of a cluster and one
// machine per launch key, whichever server writes.
func machineColumns(m *api.Machine, data string) []any {
	subnet, launchKey := sql.NullString{}, sql.NullString{}
	if m.Subnet != "" && m.Live() {
		subnet = sql.NullString{String: m.Subnet, Valid: true}
	}
	if m.LaunchKey != "" && m.LaunchKey != api.ManualLaunchKey {
		launchKey = sql.NullString{String: m.LaunchKey, Valid: true}
	}
	return []any{m.ID, m.Cluster, boolInt(m.Live()), subnet, launchKey, data}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
