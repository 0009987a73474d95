package sqlstore

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
)

// A machine's last heartbeat lives beside its document, in the liveness
// table that servers flush heartbeats into in batches: a heartbeat never
// rewrites the machine. Reads overlay the later of the two.

const machineColumnsSelect = `SELECT m.data, COALESCE(l.at, 0) FROM machines m LEFT JOIN liveness l ON l.machine_id = m.id`

func (t *tx) GetMachine(id string) (*api.Machine, error) {
	var data string
	var at int64
	if err := t.queryRow(machineColumnsSelect+` WHERE m.id = ?`, id).Scan(&data, &at); err != nil {
		return nil, t.dialect.notFound("machine", id, err)
	}
	return decodeMachine(data, at)
}

const machinesWhere = ` WHERE (? = '' OR m.cluster = ?) AND (? = 0 OR m.live = 1)`

func machinesWhereArgs(f store.MachineFilter) []any {
	return []any{f.Cluster, f.Cluster, boolInt(f.LiveOnly)}
}

func (t *tx) ListMachines(f store.MachineFilter) ([]*api.Machine, error) {
	query := machineColumnsSelect + machinesWhere
	args := machinesWhereArgs(f)
	if len(f.After) == 1 {
		query += ` AND m.id > ?`
		args = append(args, f.After[0])
	}
	query += ` ORDER BY m.id`
	if f.Limit > 0 {
		query += ` LIMIT ? OFFSET ?`
		args = append(args, f.Limit, f.Offset)
	}
	rows, err := t.query(query, args...)
	if err != nil {
		return nil, t.dialect.failure("list machines", err)
	}
	defer rows.Close()
	var out []*api.Machine
	for rows.Next() {
		var data string
		var at int64
		if err := rows.Scan(&data, &at); err != nil {
			return nil, t.dialect.failure("list machines", err)
		}
		m, err := decodeMachine(data, at)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, t.dialect.failure("list machines", err)
	}
	return out, nil
}

func (t *tx) CountMachines(f store.MachineFilter) (int, error) {
	var n int
	if err := t.queryRow(`SELECT COUNT(*) FROM machines m`+machinesWhere, machinesWhereArgs(f)...).Scan(&n); err != nil {
		return 0, t.dialect.failure("count machines", err)
	}
	return n, nil
}

func decodeMachine(data string, heartbeatNanos int64) (*api.Machine, error) {
	var m api.Machine
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		return nil, fmt.Errorf("decode machine: %w", err)
	}
	if heartbeatNanos > 0 {
		at := time.Unix(0, heartbeatNanos).UTC()
		if m.LastHeartbeat == nil || at.After(*m.LastHeartbeat) {
			m.LastHeartbeat = &at
		}
	}
	return &m, nil
}

func (t *tx) PutLiveness(beats map[string]time.Time) error {
	if len(beats) == 0 {
		return nil
	}
	mark, err := t.nextLivenessMark()
	if err != nil {
		return err
	}
	ids := slices.Sorted(maps.Keys(beats)) // one lock order for every server
	for len(ids) > 0 {
		n := livenessChunk(len(ids))
		args := make([]any, 0, 3*n)
		for _, id := range ids[:n] {
			args = append(args, id, beats[id].UnixNano(), mark)
		}
		// A later heartbeat recorded by another server is kept.
		err := t.exec("record heartbeats", `INSERT INTO liveness(machine_id, at, mark) VALUES `+strings.Repeat("(?, ?, ?), ", n-1)+`(?, ?, ?)
			ON CONFLICT(machine_id) DO UPDATE SET at = excluded.at, mark = excluded.mark WHERE excluded.at > liveness.at`, args...)
		if err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// nextLivenessMark draws the mark of this write's heartbeats, under the
// marks' lock when the dialect has one.
func (t *tx) nextLivenessMark() (int64, error) {
	if lock := t.dialect.Marks.Lock; lock != "" {
		if err := t.exec("lock the heartbeats' marks", lock); err != nil {
			return 0, err
		}
	}
	var mark int64
	if err := t.queryRow(t.dialect.Marks.Next).Scan(&mark); err != nil {
		return 0, t.dialect.failure("next heartbeat mark", err)
	}
	return mark, nil
}

func (t *tx) ListLiveness() (map[string]time.Time, error) {
	out := map[string]time.Time{}
	if err := t.ScanLiveness(store.AllLiveness, func(id string, at time.Time, _ int64) { out[id] = at }); err != nil {
		return nil, err
	}
	return out, nil
}

func (t *tx) ScanLiveness(after int64, each func(machine string, at time.Time, mark int64)) error {
	rows, err := t.query(`SELECT machine_id, at, mark FROM liveness WHERE mark > ?`, after)
	if err != nil {
		return t.dialect.failure("list liveness", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var at, mark int64
		if err := rows.Scan(&id, &at, &mark); err != nil {
			return t.dialect.failure("list liveness", err)
		}
		each(id, time.Unix(0, at).UTC(), mark)
	}
	if err := rows.Err(); err != nil {
		return t.dialect.failure("list liveness", err)
	}
	return nil
}

// livenessChunk is how many heartbeats one statement records: a power of
// two up to 256, so that a handful of statements are ever prepared.
func livenessChunk(pending int) int {
	n := 256
	for n > pending {
		n /= 2
	}
	return n
}

// MachineWork reads a machine and the replicas on it or leaving it in one
// statement (one round trip, and each part found through its index).
func (t *tx) MachineWork(id string) (*api.Machine, []*api.Replica, []*api.Replica, error) {
	rows, err := t.query(`SELECT 'm', m.data, COALESCE(l.at, 0) FROM machines m LEFT JOIN liveness l ON l.machine_id = m.id WHERE m.id = ?
		UNION ALL SELECT 'r', data, 0 FROM replicas WHERE machine = ?
		UNION ALL SELECT 'p', data, 0 FROM replicas WHERE previous_machine = ?`, id, id, id)
	if err != nil {
		return nil, nil, nil, t.dialect.failure("read machine "+id, err)
	}
	defer rows.Close()
	var m *api.Machine
	var on, leaving []*api.Replica
	for rows.Next() {
		var part, data string
		var at int64
		if err := rows.Scan(&part, &data, &at); err != nil {
			return nil, nil, nil, t.dialect.failure("read machine "+id, err)
		}
		if part == "m" {
			if m, err = decodeMachine(data, at); err != nil {
				return nil, nil, nil, err
			}
			continue
		}
		var r api.Replica
		if err := json.Unmarshal([]byte(data), &r); err != nil {
			return nil, nil, nil, fmt.Errorf("decode replica: %w", err)
		}
		if part == "r" {
			on = append(on, &r)
		} else {
			leaving = append(leaving, &r)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, nil, t.dialect.failure("read machine "+id, err)
	}
	if m == nil {
		return nil, nil, nil, fmt.Errorf("machine %q: %w", id, store.ErrNotFound)
	}
	byServiceAndID := func(a, b *api.Replica) int { return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.ID, b.ID)) }
	slices.SortFunc(on, byServiceAndID)
	slices.SortFunc(leaving, byServiceAndID)
	return m, on, leaving, nil
}
