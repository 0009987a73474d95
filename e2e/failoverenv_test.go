package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantry-dev/gantry/api"
)

// pgBinDir is Debian's newest PostgreSQL (15 on bookworm), which the
// postgres capability runs; "" when none is installed.
func pgBinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) < pgMajor(dirs[j]) })
	if len(dirs) == 0 {
		return ""
	}
	return dirs[len(dirs)-1]
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

const pgPassword = "e2e-pg-password"

// failoverSpec: two local clusters and a synchronous PostgreSQL group,
// lease 4 s; east's agents reach the server at eastAPI when set (a proxy
// the test can cut).
func failoverSpec(binDir, dataRoot, eastAPI string) string {
	return failoverGroupSpec(binDir, dataRoot, eastAPI, "synchronous: true")
}

// failoverGroupSpec is failoverSpec with the postgres capability's mode
// (its settings before passwordEnv, binDir and dataRoot).
func failoverGroupSpec(binDir, dataRoot, eastAPI, mode string) string {
	agent := ""
	if eastAPI != "" {
		agent = "\n  agent:\n    apiUrl: " + eastAPI
	}
	return fmt.Sprintf(`
kind: Cluster
metadata: {name: east}
spec:
  provider: {name: local}
  capacityGroups:
    - {groupId: db, instanceType: local.medium, minSize: 1, maxSize: 2}%s
---
kind: Cluster
metadata: {name: west}
spec:
  provider: {name: local}
  capacityGroups:
    - {groupId: db, instanceType: local.medium, minSize: 1, maxSize: 2}
---
kind: Secret
metadata: {name: pg}
spec:
  keys: {password: {env: GANTRY_E2E_PG_PASSWORD}}
---
kind: FailoverGroup
metadata: {name: pg}
spec:
  primary: {cluster: east}
  replica: {cluster: west}
  capability:
    name: postgres
    postgres: {%s, passwordEnv: PGPASS, binDir: %s, dataRoot: %s}
  template:
    ports: [{name: postgres}]
    env:
      - name: PGPASS
        secretRef: {name: pg, key: password}
    resources: {cpu: 500m, memory: 512Mi}
  health: {failureThreshold: 2, successThreshold: 1, intervalSeconds: 1}
  leaseSeconds: 4
`, agent, mode, binDir, dataRoot)
}

// needPostgres skips without PostgreSQL 15's binaries, except on CI.
func needPostgres(t *testing.T) string {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("CI") == "true" {
		skip = t.Fatalf // on CI these tests must run
	}
	bin := pgBinDir()
	if bin == "" {
		skip("PostgreSQL is not installed (Debian package postgresql; scripts/postgres-up.sh installs it)")
	}
	if os.Geteuid() != 0 {
		skip("the failover tests run PostgreSQL as its own user: they need root")
	}
	return bin
}

// pgDataRoot is where the members keep PostgreSQL's files: a directory
// PostgreSQL's user can traverse, removed with the test.
func pgDataRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gantry-e2e-pg-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command("pkill", "-9", "-f", "postgres -D "+dir).Run()
		os.RemoveAll(dir)
	})
	return dir
}

// startFailover starts a server, applies the (synchronous) group and
// waits until it is healthy with its synchronous standby recorded.
func startFailover(t *testing.T, eastAPI func(serverURL string) string, extra ...string) *server {
	t.Helper()
	return startFailoverEdited(t, nil, eastAPI, extra...)
}

// startFailoverEdited is startFailover with the spec passed through edit.
func startFailoverEdited(t *testing.T, edit func(spec string) string, eastAPI func(serverURL string) string, extra ...string) *server {
	t.Helper()
	bin := needPostgres(t)
	t.Setenv("GANTRY_E2E_PG_PASSWORD", pgPassword)
	root := pgDataRoot(t)
	s := startServer(t, t.TempDir(), extra...)
	apiURL := ""
	if eastAPI != nil {
		apiURL = eastAPI(s.url)
	}
	spec := failoverSpec(bin, root, apiURL)
	if edit != nil {
		spec = edit(spec)
	}
	s.apply(t, "pg.yaml", spec)
	// Healthy, and the synchronous standby recorded: only then may an
	// automatic failover promote without losing a write (a test that
	// fails the primary sooner sees the group rightly refuse).
	s.waitGroup(t, "the group healthy, its synchronous standby recorded", func(g *api.FailoverGroupInfo) bool {
		return g.Phase == "Healthy" && g.SyncStandby != ""
	})
	return s
}

func (s *server) group(t *testing.T) *api.FailoverGroupInfo {
	t.Helper()
	g, err := s.api.GetFailoverGroup(context.Background(), "pg")
	if err != nil {
		t.Fatal(err)
	}
	return g.Status
}

func (s *server) waitGroup(t *testing.T, what string, cond func(*api.FailoverGroupInfo) bool) *api.FailoverGroupInfo {
	t.Helper()
	var last *api.FailoverGroupInfo
	waitFor(t, what, func() (bool, string) {
		g, err := s.api.GetFailoverGroup(context.Background(), "pg")
		if err != nil {
			return false, err.Error()
		}
		last = g.Status
		return cond(g.Status), fmt.Sprintf("%+v", *g.Status)
	})
	return last
}

// primaryMachine is the machine of the group's serving primary.
func primaryMachine(g *api.FailoverGroupInfo) string {
	for _, m := range g.Members {
		if m.Cluster == g.Primary {
			return m.Machine
		}
	}
	return ""
}

// killMachine kills -9 a local machine's agent and everything in its
// process group.
func killMachine(t *testing.T, dir, machine string) {
	t.Helper()
	pid := instanceOf(t, dir, machine).PID
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

func pgConnect(ctx context.Context, endpoint string) (*pgx.Conn, error) {
	return pgx.Connect(ctx, fmt.Sprintf("postgres://postgres:%s@%s/postgres?sslmode=disable&connect_timeout=1", pgPassword, endpoint))
}

// pgWriter commits rows to whatever the group says is primary, and
// remembers every commit PostgreSQL acknowledged, and where.
type pgWriter struct {
	s  *server
	mu sync.Mutex
	// acked ids, in order, with the endpoint and time of each.
	acked []ackedRow
}

type ackedRow struct {
	id int64
	// endpoint is where the row was written, with the group's epoch when
	// the writer connected there (host:port@epoch).
	endpoint string
	at       time.Time
}

func startWriter(t *testing.T, s *server) (*pgWriter, func()) {
	t.Helper()
	w := &pgWriter{s: s}
	g := s.waitGroup(t, "a serving primary", func(g *api.FailoverGroupInfo) bool { return g.Endpoint != "" })
	conn, err := pgConnect(context.Background(), g.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), "CREATE TABLE IF NOT EXISTS rows (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(ctx)
	}()
	return w, func() { cancel(); <-done }
}

// The writer's pace: a steady stream of commits, not a load test, and a
// reconnect at most this often while no primary serves (it asks the API
// where the primary is, like a client would).
const (
	writeEvery     = 2 * time.Millisecond
	reconnectEvery = 50 * time.Millisecond
)

func (w *pgWriter) run(ctx context.Context) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	endpoint := ""
	for id := time.Now().UnixNano(); ; {
		pace := writeEvery
		if conn == nil {
			endpoint, conn = w.connect(ctx)
			pace = reconnectEvery
		}
		if conn != nil {
			// Every attempt takes a new id: one that failed may still have
			// committed (unacknowledged), and must not block the next.
			id++
			if w.insert(ctx, conn, id, endpoint) {
				pace = writeEvery
			} else {
				conn.Close(context.Background())
				conn = nil
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pace):
		}
	}
}

// connect asks the API where the primary serves and connects to it.
func (w *pgWriter) connect(ctx context.Context) (string, *pgx.Conn) {
	g, err := w.s.api.GetFailoverGroup(ctx, "pg")
	if err != nil || g.Status.Endpoint == "" {
		return "", nil
	}
	conn, err := pgConnect(ctx, g.Status.Endpoint)
	if err != nil {
		return "", nil
	}
	return fmt.Sprintf("%s@%d", g.Status.Endpoint, g.Status.Epoch), conn
}

// insert commits one row and records it when PostgreSQL acknowledged it.
func (w *pgWriter) insert(ctx context.Context, conn *pgx.Conn, id int64, endpoint string) bool {
	callCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := conn.Exec(callCtx, "INSERT INTO rows VALUES ($1)", id); err != nil {
		return false
	}
	w.mu.Lock()
	w.acked = append(w.acked, ackedRow{id: id, endpoint: endpoint, at: time.Now()})
	w.mu.Unlock()
	return true
}

func (w *pgWriter) rows() []ackedRow {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]ackedRow(nil), w.acked...)
}

// firstAfter is the first row acknowledged by another endpoint than
// before, after t0.
func (w *pgWriter) firstAfter(t0 time.Time, before string) (ackedRow, bool) {
	for _, r := range w.rows() {
		if address, _, _ := strings.Cut(r.endpoint, "@"); r.at.After(t0) && address != before {
			return r, true
		}
	}
	return ackedRow{}, false
}

// checkNoRowLost fails unless every acknowledged row is on the primary.
func checkNoRowLost(t *testing.T, s *server, w *pgWriter) {
	t.Helper()
	acked := w.rows()
	ids := make([]int64, len(acked))
	for i, r := range acked {
		ids[i] = r.id
	}
	conn, err := pgConnect(context.Background(), s.group(t).Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var present int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM rows WHERE id = ANY($1)", ids).Scan(&present); err != nil {
		t.Fatal(err)
	}
	if present != len(ids) {
		t.Fatalf("%d acknowledged rows, %d on the primary: %d lost", len(ids), present, len(ids)-present)
	}
	t.Logf("all %d acknowledged rows are on the primary", len(ids))
}

// primarySampler samples every endpoint either side ever served at and
// counts the instants when two of them accepted writes.
type primarySampler struct {
	s         *server
	mu        sync.Mutex
	endpoints map[string]bool
	samples   int
	split     []string
}

func startSampler(t *testing.T, s *server) (*primarySampler, func()) {
	return startSamplerEvery(t, s, 100*time.Millisecond)
}

func startSamplerEvery(t *testing.T, s *server, interval time.Duration) (*primarySampler, func()) {
	p := &primarySampler{s: s, endpoints: map[string]bool{}}
	stop := every(interval, p.sample)
	return p, stop
}

func (p *primarySampler) sample() {
	if g, err := p.s.api.GetFailoverGroup(context.Background(), "pg"); err == nil {
		for _, m := range g.Status.Members {
			if m.Endpoint != "" {
				p.mu.Lock()
				p.endpoints[m.Endpoint] = true
				p.mu.Unlock()
			}
		}
	}
	p.mu.Lock()
	endpoints := make([]string, 0, len(p.endpoints))
	for e := range p.endpoints {
		endpoints = append(endpoints, e)
	}
	p.mu.Unlock()
	var primaries []string
	for _, e := range endpoints {
		if acceptsWrites(e) {
			primaries = append(primaries, e)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples++
	if len(primaries) > 1 {
		p.split = append(p.split, fmt.Sprint(time.Now().Format(time.RFC3339Nano), primaries))
	}
}

// acceptsWrites: PostgreSQL at endpoint answers and is out of recovery.
func acceptsWrites(endpoint string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := pgConnect(ctx, endpoint)
	if err != nil {
		return false
	}
	defer conn.Close(context.Background())
	var inRecovery bool
	return conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery) == nil && !inRecovery
}

func (p *primarySampler) check(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.split) > 0 {
		t.Fatalf("two primaries at %d of %d sampled instants: %v", len(p.split), p.samples, p.split)
	}
	t.Logf("never two primaries in %d samples over %d endpoints", p.samples, len(p.endpoints))
}
