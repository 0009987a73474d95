package sqlstore

import (
	"encoding/json"
	"fmt"
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

func (t *tx) ListMachines(f store.MachineFilter) ([]*api.Machine, error) {
	rows, err := t.query(machineColumnsSelect+` WHERE (? = '' OR m.cluster = ?) AND (? = 0 OR m.live = 1) ORDER BY m.id`,
		f.Cluster, f.Cluster, boolInt(f.LiveOnly))
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
	for id, at := range beats {
		// A later heartbeat recorded by another server is kept.
		err := t.exec("record heartbeats", `INSERT INTO liveness(machine_id, at) VALUES (?, ?)
			ON CONFLICT(machine_id) DO UPDATE SET at = excluded.at WHERE excluded.at > liveness.at`, id, at.UnixNano())
		if err != nil {
			return err
		}
	}
	return nil
}
