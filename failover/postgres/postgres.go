// Package postgres is the PostgreSQL failover capability: streaming
// replication between two PostgreSQL 15 servers, run by `gantry member`.
// The primary is initialised with initdb (data checksums, so pg_rewind
// works); the replica is seeded with pg_basebackup and streams from the
// primary; promotion is pg_promote(); a former primary follows the new
// one after pg_rewind (or is seeded afresh when the rewind fails). With
// synchronous replication, a primary waits for its replica's flush on
// every commit while a replica streams; when none does, it goes on
// waiting until the server has recorded that it has no synchronous
// standby, and only then acknowledges alone, as Patroni's synchronous
// mode does with its /sync key (see Replication).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/failover/member"
)

// Config is how the capability runs PostgreSQL.
type Config struct {
	api.PostgresCapability
	// Dir holds data/, the socket directory and the password file.
	Dir string
	// Machine and Group name the directory under DataRoot (as root).
	Machine, Group string
	// Port is where PostgreSQL listens (the replica's first port).
	Port int
	// Password of the postgres user ("": trust from loopback only).
	Password string
	// StartTimeout bounds a start; StopTimeout a fast shutdown before an
	// immediate one.
	StartTimeout time.Duration
	StopTimeout  time.Duration
	// ReadyPoll is how often a starting server is tried.
	ReadyPoll time.Duration
	Log       *slog.Logger
}

// Postgres is the capability.
type Postgres struct {
	cfg  Config
	cred *syscall.Credential
	uid  int
	gid  int

	// server is the postmaster.
	server *member.Child
	mu     sync.Mutex
	conn   *pgx.Conn
}

// DefaultDataRoot is where a root agent's members keep PostgreSQL's files.
const DefaultDataRoot = "/var/lib/gantry/failover"

// New prepares the capability: when running as root, PostgreSQL runs as
// cfg.User (it refuses to run as root) in a directory under DataRoot,
// whose parents it can traverse.
func New(cfg Config) (*Postgres, error) {
	p := &Postgres{cfg: cfg, uid: -1, gid: -1, server: member.NewChild()}
	if os.Geteuid() == 0 {
		root := cmpOr(cfg.DataRoot, DefaultDataRoot)
		if err := os.MkdirAll(root, 0o711); err != nil {
			return nil, fmt.Errorf("postgres data root: %w", err)
		}
		machineDir := filepath.Join(root, cfg.Machine)
		if err := os.MkdirAll(machineDir, 0o711); err != nil {
			return nil, fmt.Errorf("postgres data root: %w", err)
		}
		p.cfg.Dir = filepath.Join(machineDir, cfg.Group)
		u, err := user.Lookup(cfg.User)
		if err != nil {
			return nil, fmt.Errorf("postgres user %q: %w", cfg.User, err)
		}
		p.uid, _ = strconv.Atoi(u.Uid)
		p.gid, _ = strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(p.uid), Gid: uint32(p.gid)}
	}
	for _, d := range []string{p.cfg.Dir, p.socketDir()} {
		if err := p.ownedDir(d); err != nil {
			return nil, err
		}
	}
	if err := p.writePassfile(); err != nil {
		return nil, err
	}
	return p, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (p *Postgres) dataDir() string   { return filepath.Join(p.cfg.Dir, "data") }
func (p *Postgres) socketDir() string { return filepath.Join(p.cfg.Dir, "run") }
func (p *Postgres) passfile() string  { return filepath.Join(p.cfg.Dir, "pgpass") }
func (p *Postgres) bin(name string) string {
	return filepath.Join(p.cfg.BinDir, name)
}

func (p *Postgres) ownedDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("postgres dir: %w", err)
	}
	if p.uid >= 0 {
		if err := os.Chown(dir, p.uid, p.gid); err != nil {
			return fmt.Errorf("postgres dir: %w", err)
		}
	}
	return nil
}

// writePassfile keeps the password out of command lines and of
// primary_conninfo: libpq reads it from this 0600 file.
func (p *Postgres) writePassfile() error {
	content := ""
	if p.cfg.Password != "" {
		content = "*:*:*:postgres:" + strings.NewReplacer(`\`, `\\`, `:`, `\:`).Replace(p.cfg.Password) + "\n"
	}
	if err := os.WriteFile(p.passfile(), []byte(content), 0o600); err != nil {
		return fmt.Errorf("postgres passfile: %w", err)
	}
	if p.uid >= 0 {
		return os.Chown(p.passfile(), p.uid, p.gid)
	}
	return nil
}

// Exited implements member.Capability.
func (p *Postgres) Exited() <-chan struct{} { return p.server.Exited() }

func (p *Postgres) running() bool { return p.server.Running() }

func (p *Postgres) hasData() bool {
	_, err := os.Stat(filepath.Join(p.dataDir(), "PG_VERSION"))
	return err == nil
}

func (p *Postgres) isStandby() bool {
	_, err := os.Stat(filepath.Join(p.dataDir(), "standby.signal"))
	return err == nil
}

// Deploy implements member.Capability.
func (p *Postgres) Deploy(ctx context.Context, bootstrap bool) error {
	if !p.hasData() {
		if !bootstrap {
			return errors.New("no data here, and the group had a primary already: refusing to initialise a new one")
		}
		if err := p.initdb(ctx); err != nil {
			return err
		}
	}
	if !p.running() {
		if err := p.start(ctx); err != nil {
			return err
		}
	}
	if p.isStandby() {
		// Promoted while this member was down: finish the promotion.
		return p.Promote(ctx)
	}
	return nil
}

func (p *Postgres) initdb(ctx context.Context) error {
	if err := p.ownedDir(p.dataDir()); err != nil {
		return err
	}
	args := []string{"-D", p.dataDir(), "-U", "postgres", "--data-checksums", "--auth-local=trust", "-E", "UTF8", "--locale=C"}
	if p.cfg.Password != "" {
		pwfile := filepath.Join(p.cfg.Dir, "initdb-pw")
		if err := os.WriteFile(pwfile, []byte(p.cfg.Password+"\n"), 0o600); err != nil {
			return err
		}
		defer os.Remove(pwfile)
		if p.uid >= 0 {
			_ = os.Chown(pwfile, p.uid, p.gid)
		}
		args = append(args, "--auth-host=scram-sha-256", "--pwfile="+pwfile)
	} else {
		args = append(args, "--auth-host=trust")
	}
	if err := p.run(ctx, "initdb", args...); err != nil {
		return err
	}
	if p.cfg.Password == "" {
		return nil
	}
	// Replicas connect from other machines: password only.
	hba, err := os.OpenFile(filepath.Join(p.dataDir(), "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer hba.Close()
	_, err = hba.WriteString("host all all 0.0.0.0/0 scram-sha-256\nhost replication all 0.0.0.0/0 scram-sha-256\n")
	return err
}

// run runs a PostgreSQL program as PostgreSQL's user, its output in the
// member's log.
func (p *Postgres) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, p.bin(name), args...)
	cmd.Env, cmd.Dir = append(os.Environ(), "PGPASSFILE="+p.passfile()), p.cfg.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(lastLines(string(out), 5)))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// start runs the postmaster. It gets SIGKILL when this member dies (a
// killed machine leaves no PostgreSQL serving); the thread that starts
// it stays until it exits, as the parent-death signal follows threads.
func (p *Postgres) start(ctx context.Context) error {
	args := []string{"-D", p.dataDir(), "-p", strconv.Itoa(p.cfg.Port), "-k", p.socketDir(),
		"-c", "listen_addresses=*", "-c", "wal_level=replica", "-c", "hot_standby=on", "-c", "wal_log_hints=on",
		"-c", "max_wal_senders=10", "-c", "wal_keep_size=512MB", "-c", "synchronous_commit=on",
		"-c", "wal_sender_timeout=5s", "-c", "wal_receiver_timeout=5s", "-c", "wal_retrieve_retry_interval=500ms"}
	if err := p.clearLeftovers(ctx); err != nil {
		return err
	}
	cmd := exec.Command(p.bin("postgres"), args...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = os.Stdout, os.Stderr, p.cfg.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	if err := p.server.Start(cmd); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	return p.waitReady(ctx)
}

func (p *Postgres) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(p.cfg.StartTimeout)
	for {
		_, err := p.connect(ctx)
		if !p.running() {
			// A server that answers while ours exited is another's.
			p.dropConn()
			return errors.New("postgres exited while starting (see the replica's log)")
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready within %s: %w", p.cfg.StartTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(p.cfg.ReadyPoll):
		}
	}
}

// connect returns the member's connection over the Unix socket (kept
// open; reopened when it broke).
func (p *Postgres) connect(ctx context.Context) (*pgx.Conn, error) {
	p.mu.Lock()
	conn := p.conn
	p.mu.Unlock()
	if conn != nil && !conn.IsClosed() {
		return conn, nil
	}
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres connect_timeout=2", p.socketDir(), p.cfg.Port))
	if err != nil {
		return nil, err
	}
	conn, err = pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.conn = conn
	p.mu.Unlock()
	return conn, nil
}

func (p *Postgres) dropConn() {
	p.mu.Lock()
	conn := p.conn
	p.conn = nil
	p.mu.Unlock()
	if conn != nil {
		_ = conn.Close(context.Background())
	}
}

// Fence implements member.Capability: a fast shutdown (every WAL record
// is sent to a connected replica first), immediate if it takes too long.
func (p *Postgres) Fence(ctx context.Context) error {
	p.dropConn()
	if !p.running() {
		return nil
	}
	exited := p.server.Exited()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGQUIT, syscall.SIGKILL} {
		_ = p.server.Signal(sig, false)
		select {
		case <-exited:
			return nil
		case <-time.After(p.cfg.StopTimeout):
		case <-ctx.Done():
			_ = p.server.Signal(syscall.SIGKILL, false)
			<-exited
			return ctx.Err()
		}
	}
	<-exited
	return nil
}

// Health implements member.Capability: a primary answers out of
// recovery; a replica answers in recovery.
func (p *Postgres) Health(ctx context.Context) error {
	if !p.running() {
		return errors.New("postgres is not running")
	}
	conn, err := p.connect(ctx)
	if err != nil {
		return err
	}
	var inRecovery bool
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil {
		p.dropConn()
		return err
	}
	if !inRecovery && p.isStandby() {
		return errors.New("still a standby")
	}
	// A standby serves whether or not it streams now (when the primary
	// dies, streaming stops first); whether promoting it would lose
	// acknowledged commits is told by Replication's reports.
	return nil
}

// Promote implements member.Capability.
func (p *Postgres) Promote(ctx context.Context) error {
	conn, err := p.connect(ctx)
	if err != nil {
		return err
	}
	var done bool
	if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&done); err != nil {
		p.dropConn()
		return fmt.Errorf("pg_promote: %w", err)
	}
	if !done {
		return errors.New("pg_promote did not finish within 60 s")
	}
	return nil
}

// Replicate implements member.Capability.
func (p *Postgres) Replicate(ctx context.Context, primary string) error {
	if err := reachable(ctx, primary); err != nil {
		return err
	}
	switch {
	case p.hasData() && !p.isStandby():
		return p.Demote(ctx, primary) // its data served as primary: rewind first
	case !p.hasData():
		if err := p.seed(ctx, primary); err != nil {
			return err
		}
	}
	if p.running() {
		return p.follow(ctx, primary)
	}
	if err := p.writeStandby(primary); err != nil {
		return err
	}
	return p.start(ctx)
}

// seed copies the primary's data with pg_basebackup into a new
// directory, which replaces the data only once the copy is whole.
func (p *Postgres) seed(ctx context.Context, primary string) error {
	host, port, err := net.SplitHostPort(primary)
	if err != nil {
		return fmt.Errorf("primary address %q: %w", primary, err)
	}
	fresh := p.dataDir() + ".seed"
	if err := os.RemoveAll(fresh); err != nil {
		return err
	}
	if err := p.ownedDir(fresh); err != nil {
		return err
	}
	p.cfg.Log.Info("seeding from the primary with pg_basebackup", "primary", primary)
	if err := p.run(ctx, "pg_basebackup", "-h", host, "-p", port, "-U", "postgres", "-D", fresh, "-X", "stream", "--checkpoint=fast", "-w"); err != nil {
		return err
	}
	if err := os.RemoveAll(p.dataDir()); err != nil {
		return err
	}
	return os.Rename(fresh, p.dataDir())
}

// reachable checks the primary accepts connections before anything is
// changed to follow it.
func reachable(ctx context.Context, primary string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", primary)
	if err != nil {
		return fmt.Errorf("primary %s not reachable (%v): %w", primary, err, member.ErrNotYet)
	}
	return conn.Close()
}

func (p *Postgres) conninfo(primary string) (string, error) {
	host, port, err := net.SplitHostPort(primary)
	if err != nil {
		return "", fmt.Errorf("primary address %q: %w", primary, err)
	}
	return fmt.Sprintf("host=%s port=%s user=postgres passfile=%s application_name=%s", host, port, p.passfile(), p.standbyName()), nil
}

// writeStandby makes the stopped data a standby of primary.
func (p *Postgres) writeStandby(primary string) error {
	info, err := p.conninfo(primary)
	if err != nil {
		return err
	}
	auto := filepath.Join(p.dataDir(), "postgresql.auto.conf")
	old, _ := os.ReadFile(auto)
	var kept []string
	for _, line := range strings.Split(string(old), "\n") {
		if line != "" && !strings.HasPrefix(line, "primary_conninfo") && !strings.HasPrefix(line, "synchronous_standby_names") {
			kept = append(kept, line)
		}
	}
	kept = append(kept, "primary_conninfo = "+literal(info), "synchronous_standby_names = ''")
	for path, content := range map[string]string{auto: strings.Join(kept, "\n") + "\n", filepath.Join(p.dataDir(), "standby.signal"): ""} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return err
		}
		if p.uid >= 0 {
			if err := os.Chown(path, p.uid, p.gid); err != nil {
				return err
			}
		}
	}
	return nil
}

// follow points a running replica at a primary that moved.
func (p *Postgres) follow(ctx context.Context, primary string) error {
	info, err := p.conninfo(primary)
	if err != nil {
		return err
	}
	conn, err := p.connect(ctx)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "ALTER SYSTEM SET primary_conninfo = "+literal(info)); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "SELECT pg_reload_conf()")
	return err
}

// Demote implements member.Capability: stop, rewind onto the new
// primary's timeline, follow it; seed afresh when the rewind fails.
func (p *Postgres) Demote(ctx context.Context, primary string) error {
	if err := reachable(ctx, primary); err != nil {
		return err
	}
	if err := p.Fence(ctx); err != nil {
		return err
	}
	info, err := p.conninfo(primary)
	if err != nil {
		return err
	}
	// pg_rewind recovers an unclean target in single-user mode, which
	// refuses standby mode.
	if err := os.Remove(filepath.Join(p.dataDir(), "standby.signal")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if p.hasData() {
		if err := p.rewind(ctx, primary, info); err != nil {
			p.cfg.Log.Warn("pg_rewind failed; seeding afresh", "err", err)
			if err := p.seed(ctx, primary); err != nil {
				return err
			}
		}
	} else if err := p.seed(ctx, primary); err != nil {
		return err
	}
	if err := p.writeStandby(primary); err != nil {
		return err
	}
	err = p.start(ctx)
	if err == nil {
		return nil
	}
	p.cfg.Log.Warn("the rewound data does not start as a replica; seeding afresh", "err", err)
	_ = p.Fence(ctx)
	if err := p.seed(ctx, primary); err != nil {
		return err
	}
	if err := p.writeStandby(primary); err != nil {
		return err
	}
	return p.start(ctx)
}

// rewind moves the data onto the new primary's timeline. The new primary
// checkpoints first: until its end-of-recovery checkpoint, its control
// file still names the old timeline and pg_rewind would see nothing to do.
func (p *Postgres) rewind(ctx context.Context, primary, info string) error {
	cfg, err := pgx.ParseConfig(info + " dbname=postgres connect_timeout=5")
	if err != nil {
		return err
	}
	cfg.Password = p.cfg.Password
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect to the new primary %s: %w", primary, err)
	}
	_, err = conn.Exec(ctx, "CHECKPOINT")
	_ = conn.Close(context.Background())
	if err != nil {
		return fmt.Errorf("checkpoint on the new primary: %w", err)
	}
	return p.run(ctx, "pg_rewind", "--target-pgdata="+p.dataDir(), "--source-server="+info+" dbname=postgres")
}

// literal quotes s as an SQL (and postgresql.conf) string literal.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
