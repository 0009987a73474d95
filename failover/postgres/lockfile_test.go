package postgres

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store/postgres/pgtest"
)

// newCapability is a PostgreSQL capability on a data root of the test's
// own, which PostgreSQL's user can reach when the test runs as root.
func newCapability(t *testing.T, root string) *Postgres {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return newCapabilityOn(t, root, port)
}

func newCapabilityOn(t *testing.T, root string, port int) *Postgres {
	t.Helper()
	p, err := New(Config{
		PostgresCapability: api.PostgresCapability{BinDir: pgtest.BinDir(t), User: "postgres", DataRoot: root},
		Dir:                filepath.Join(root, "member"), Machine: "m1", Group: "pg", Port: port,
		StartTimeout: time.Minute, StopTimeout: 5 * time.Second, ReadyPoll: 20 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Fence(context.Background()) })
	return p
}

func dataRoot(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("", "gantry-pgcap-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	return root
}

// otherProcessOfPostgresUser is a live process of PostgreSQL's user that
// is no postmaster: what a killed postmaster's pid becomes on a busy host.
func otherProcessOfPostgresUser(t *testing.T, p *Postgres) int {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

// withPid is a lock file's content with another pid on its first line.
func withPid(content []byte, pid int) []byte {
	_, rest, _ := strings.Cut(string(content), "\n")
	return []byte(strconv.Itoa(pid) + "\n" + rest)
}

// A postmaster killed with SIGKILL leaves its lock files; when its pid
// now belongs to another process of PostgreSQL's user, PostgreSQL alone
// refuses to start ("lock file already exists") for as long as that
// process lives. The fault schedule's seed 476 left a group's promoted
// member in exactly that state for good.
func TestStartsAgainOverLockFilesWhosePidWasReused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := newCapability(t, dataRoot(t))
	if err := p.Deploy(ctx, true); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	kept := map[string][]byte{}
	for _, file := range p.lockFiles() {
		content, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("a running server's lock file: %v", err)
		}
		kept[file] = content
	}
	if err := p.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	// What a SIGKILL leaves, its pid taken by someone else since.
	reused := otherProcessOfPostgresUser(t, p)
	for file, content := range kept {
		if err := os.WriteFile(file, withPid(content, reused), 0o600); err != nil {
			t.Fatal(err)
		}
		if p.uid >= 0 {
			_ = os.Chown(file, p.uid, p.gid)
		}
	}
	if err := p.Deploy(ctx, false); err != nil {
		t.Fatalf("deploy over lock files naming pid %d (not a postmaster): %v", reused, err)
	}
	if err := p.Health(ctx); err != nil {
		t.Fatalf("health after the start: %v", err)
	}
	if err := syscall.Kill(reused, 0); err != nil {
		t.Fatalf("the process that holds the reused pid was harmed: %v", err)
	}
}

// A postmaster that outlived the member that started it (its member
// gone, the agent starting another) is stopped by the new member, which
// then runs its own on the same data.
func TestStopsAPostmasterThatOutlivedItsMember(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := dataRoot(t)
	old := newCapability(t, root)
	if err := old.Deploy(ctx, true); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	leftover, err := lockOwner(old.lockFiles()[0])
	if err != nil || leftover == 0 {
		t.Fatalf("the running postmaster's pid: %d, %v", leftover, err)
	}
	next := newCapabilityOn(t, root, old.cfg.Port)
	if err := next.Deploy(ctx, false); err != nil {
		t.Fatalf("deploy beside a leftover postmaster: %v", err)
	}
	// The old server answering on the shared socket would pass for the
	// new one: the pid file tells them apart.
	if pid, _ := lockOwner(next.lockFiles()[0]); pid == leftover || pid == 0 {
		t.Fatalf("postmaster.pid names %d, want the new postmaster (the old was %d)", pid, leftover)
	}
	if !next.running() {
		t.Fatal("the new member's postmaster does not run")
	}
	select {
	case <-old.Exited():
	case <-ctx.Done():
		t.Fatalf("the leftover postmaster %d still runs", leftover)
	}
	if err := next.Health(ctx); err != nil {
		t.Fatalf("health of the new member's server: %v", err)
	}
}

// A lock file naming a live process that is not a postmaster of this
// data directory is never taken for one.
func TestIsOurPostmasterOnlyForThisDataDirectory(t *testing.T) {
	p := newCapability(t, dataRoot(t))
	if p.isOurPostmaster(os.Getpid()) {
		t.Fatal("the test process taken for a postmaster")
	}
	if p.isOurPostmaster(otherProcessOfPostgresUser(t, p)) {
		t.Fatal("a sleep taken for a postmaster")
	}
	if p.isOurPostmaster(idleCalled(t, "postgres", "-D", p.dataDir()+"-other", "-p", "1")) {
		t.Fatal("a postmaster of another data directory taken for this one's")
	}
	if !p.isOurPostmaster(idleCalled(t, "postgres", "-D", p.dataDir(), "-p", "1")) {
		t.Fatal("a postmaster of this data directory not recognised")
	}
}

// idleCalled starts this test binary, idle, under the argument vector
// argv, and returns its pid once the child says it runs: its arguments
// are then set up. (sleep(1) itself exits at once on postgres's options,
// and Start returns as soon as the child has released the parent's memory
// in execve, before the new image's arguments exist.) The child stays
// until its stdin closes.
func idleCalled(t *testing.T, argv ...string) int {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Args = argv
	cmd.Env = append(os.Environ(), idleChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != idleChildReady+"\n" {
		t.Fatalf("the idle child said %q, %v", line, err)
	}
	return cmd.Process.Pid
}

// idleChildEnv makes the test binary an idle child (see idleCalled),
// which says idleChildReady and waits for its stdin to close.
const (
	idleChildEnv   = "GANTRY_TEST_IDLE_CHILD"
	idleChildReady = "idle"
)

func TestMain(m *testing.M) {
	if os.Getenv(idleChildEnv) == "1" {
		fmt.Println(idleChildReady)
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}
