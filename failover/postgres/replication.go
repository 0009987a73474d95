package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/failover/member"
)

var _ member.Reporter = (*Postgres)(nil)

// standbyName is this member's application_name as a standby: its
// primary names it so in pg_stat_replication, and it reports it, so the
// server can tell which standby the primary's commits wait for.
func (p *Postgres) standbyName() string {
	sum := sha256.Sum256([]byte(p.cfg.Machine + "/" + p.cfg.Group))
	return "gantry_" + hex.EncodeToString(sum[:8])
}

// Replication implements member.Reporter: a standby's received and
// replayed WAL positions and whether it streams; a primary's flushed
// position and the standby every commit waits for. A synchronous primary
// keeps synchronous_standby_names in step: on as soon as a standby
// streams; off only when none streams and the server has recorded
// (role.SyncStandby == "") that it has no synchronous standby, so an
// automatic failover never promotes a standby that misses a commit
// acknowledged without it.
func (p *Postgres) Replication(ctx context.Context, role api.FailoverAssignment) (*api.ReplicationStatus, error) {
	conn, err := p.connect(ctx)
	if err != nil {
		return nil, err
	}
	var inRecovery bool
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil {
		p.dropConn()
		return nil, err
	}
	if inRecovery {
		return p.standbyReport(ctx, conn)
	}
	return p.primaryReport(ctx, conn, role)
}

func (p *Postgres) standbyReport(ctx context.Context, conn *pgx.Conn) (*api.ReplicationStatus, error) {
	st := &api.ReplicationStatus{Name: p.standbyName()}
	var received, replayed int64
	err := conn.QueryRow(ctx, `SELECT
		COALESCE((pg_last_wal_receive_lsn() - '0/0'::pg_lsn)::bigint, 0),
		COALESCE((pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint, 0),
		COALESCE((SELECT status = 'streaming' FROM pg_stat_wal_receiver), false),
		COALESCE((SELECT received_tli FROM pg_stat_wal_receiver), (SELECT timeline_id FROM pg_control_checkpoint()))`).
		Scan(&received, &replayed, &st.Streaming, &st.Timeline)
	if err != nil {
		p.dropConn()
		return nil, fmt.Errorf("standby replication status: %w", err)
	}
	st.ReceivedPosition, st.ReplayedPosition = uint64(max(received, 0)), uint64(max(replayed, 0))
	return st, nil
}

func (p *Postgres) primaryReport(ctx context.Context, conn *pgx.Conn, role api.FailoverAssignment) (*api.ReplicationStatus, error) {
	st := &api.ReplicationStatus{}
	var flushed int64
	var names string
	err := conn.QueryRow(ctx, `SELECT (pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::bigint,
		(SELECT timeline_id FROM pg_control_checkpoint()), current_setting('synchronous_standby_names')`).Scan(&flushed, &st.Timeline, &names)
	if err != nil {
		p.dropConn()
		return nil, fmt.Errorf("primary replication status: %w", err)
	}
	st.FlushPosition = uint64(max(flushed, 0))
	rows, err := conn.Query(ctx, "SELECT application_name, state, sync_state FROM pg_stat_replication")
	if err != nil {
		p.dropConn()
		return nil, fmt.Errorf("pg_stat_replication: %w", err)
	}
	streaming := false
	for rows.Next() {
		var name, state, syncState string
		if err := rows.Scan(&name, &state, &syncState); err != nil {
			rows.Close()
			return nil, err
		}
		streaming = streaming || state == "streaming"
		if syncState == "sync" && names != "" {
			st.SyncStandby = name
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !p.cfg.Synchronous {
		return st, nil
	}
	switch on := names != ""; {
	case streaming && !on:
		err = p.setSynchronous(ctx, conn, "*")
	case !streaming && on && role.SyncStandby == "":
		err = p.setSynchronous(ctx, conn, "")
	case !streaming && on:
		p.cfg.Log.Warn("synchronous standby gone: commits wait until the server records that this primary has none", "standby", role.SyncStandby)
	}
	return st, err
}

// setSynchronous sets synchronous_standby_names ("*": any streaming
// standby; "": none, commits are acknowledged alone).
func (p *Postgres) setSynchronous(ctx context.Context, conn *pgx.Conn, names string) error {
	if names != "" && names != "*" {
		return errors.New("synchronous_standby_names: only * or nothing")
	}
	if _, err := conn.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = '"+names+"'"); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	p.cfg.Log.Info("synchronous replication", "on", names != "")
	return nil
}
