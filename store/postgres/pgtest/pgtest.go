// Package pgtest gives tests PostgreSQL databases: a fresh database per
// test on the server scripts/postgres-up.sh started (GANTRY_TEST_POSTGRES),
// or a whole server of the test's own when it must stop and start it.
// Without PostgreSQL the tests skip, except on CI (CI=true), where that is
// a failure.
package pgtest

import (
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/internal/randid"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

func missing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not set, and CI=true: the PostgreSQL tests must run on CI (./scripts/test.sh starts a server)", what)
	}
	t.Skipf("%s is not set: run ./scripts/test.sh, or eval \"$(./scripts/postgres-up.sh | sed 's/^/export /')\"", what)
}

// URL returns the URL of a new, empty database, dropped when the test
// ends.
func URL(t testing.TB) string {
	t.Helper()
	admin := os.Getenv("GANTRY_TEST_POSTGRES")
	if admin == "" {
		missing(t, "GANTRY_TEST_POSTGRES")
	}
	return createDatabase(t, admin)
}

func createDatabase(t testing.TB, admin string) string {
	t.Helper()
	db, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	name := "gantry_test_" + strings.ToLower(randid.Base32(12))
	if _, err := db.Exec(`CREATE DATABASE ` + name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", admin)
		if err != nil {
			return
		}
		defer db.Close()
		_, _ = db.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`)
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// BinDir is the directory of PostgreSQL's programs that
// scripts/postgres-up.sh found (the test skips without it, or fails on
// CI).
func BinDir(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("GANTRY_TEST_POSTGRES_BIN")
	if bin == "" {
		missing(t, "GANTRY_TEST_POSTGRES_BIN")
	}
	return bin
}

// Server is a PostgreSQL server of one test's own.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
}

// NewServer initializes and starts a server on a free loopback port; it
// is stopped when the test ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	bin := BinDir(t)
	dir, err := os.MkdirTemp("", "gantry-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &Server{t: t, bin: bin, dir: dir, port: freePort(t)}
	s.chownForRoot()
	s.run("initdb", "-D", s.data(), "-U", "gantry", "-A", "trust", "--no-sync")
	s.Start()
	t.Cleanup(func() { _ = s.ctl("stop", "-m", "immediate") })
	return s
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// Start starts the server (again).
func (s *Server) Start() {
	s.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", s.port, s.dir)
	if err := s.ctl("start", "-w", "-t", "60", "-l", filepath.Join(s.dir, "log"), "-o", opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		s.t.Fatalf("start postgres: %v\n%s", err, log)
	}
}

// Stop stops the server at once, as a crash would.
func (s *Server) Stop() {
	s.t.Helper()
	if err := s.ctl("stop", "-w", "-m", "immediate"); err != nil {
		s.t.Fatalf("stop postgres: %v", err)
	}
}

// URL returns the URL of a new database on this server.
func (s *Server) URL() string {
	return createDatabase(s.t, fmt.Sprintf("postgres://gantry@127.0.0.1:%d/postgres?sslmode=disable", s.port))
}

func (s *Server) ctl(args ...string) error {
	out, err := s.command("pg_ctl", append([]string{"-D", s.data()}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %w: %s", args[0], err, out)
	}
	return nil
}

func (s *Server) run(name string, args ...string) {
	s.t.Helper()
	if out, err := s.command(name, args...).CombinedOutput(); err != nil {
		s.t.Fatalf("%s: %v\n%s", name, err, out)
	}
}

// command runs a PostgreSQL binary, as the postgres user when the test
// runs as root (PostgreSQL refuses root).
func (s *Server) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(s.bin, name)
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	}
	return exec.Command(path, args...)
}

func (s *Server) chownForRoot() {
	if os.Geteuid() != 0 {
		return
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		s.t.Fatalf("running as root needs the postgres user: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(s.dir, uid, gid); err != nil {
		s.t.Fatal(err)
	}
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
