package process

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/internal/proctest"
	"github.com/gantry-dev/gantry/runtime"
)

func TestEnvironmentPortsAndLogs(t *testing.T) {
	t.Setenv("AGENT_SECRET", "do-not-leak")
	dir := t.TempDir()
	d := New(Config{Dir: dir})
	task, err := d.Start(context.Background(), runtime.Spec{
		ReplicaID: "web-0", Service: "web", MachineID: "m1",
		Command:   []string{"sh", "-c", `echo "$PORT $GANTRY_PORT_HTTP $GANTRY_PORT_ADMIN_API $FOO $GANTRY_REPLICA ${AGENT_SECRET:-none} $(pwd)"; echo oops >&2`},
		Env:       map[string]string{"FOO": "bar"},
		HostPorts: map[string]int{"http": 8081, "admin-api": 9090},
	})
	if err != nil {
		t.Fatal(err)
	}
	<-task.Done()
	if task.ExitError() != nil {
		t.Fatal(task.ExitError())
	}
	out, _ := os.ReadFile(filepath.Join(dir, "web-0", "output.log"))
	want := "9090 8081 9090 bar web-0 none " + filepath.Join(dir, "web-0") + "\noops\n"
	// PORT is the first port by name ("admin-api" < "http"); stderr goes
	// to the same log.
	if string(out) != want {
		t.Fatalf("output %q, want %q", out, want)
	}
	if ep, ok := task.Endpoint("http"); !ok || ep != "127.0.0.1:8081" {
		t.Fatalf("endpoint %q %v", ep, ok)
	}
}

func TestStopKillsTheWholeProcessGroup(t *testing.T) {
	dir := t.TempDir()
	d := New(Config{Dir: dir})
	// The replica ignores SIGTERM and has a child: both must be gone.
	task, err := d.Start(context.Background(), runtime.Spec{ReplicaID: "r", Command: []string{"sh", "-c", `trap "" TERM; sleep 300 & echo $! > child.pid; wait`}})
	if err != nil {
		t.Fatal(err)
	}
	childPID := 0
	for i := 0; i < 100 && childPID == 0; i++ {
		data, _ := os.ReadFile(filepath.Join(dir, "r", "child.pid"))
		childPID = atoi(strings.TrimSpace(string(data)))
		time.Sleep(20 * time.Millisecond)
	}
	if childPID == 0 {
		t.Fatal("child never started")
	}
	if err := task.Stop(context.Background(), 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	<-task.Done()
	for i := 0; i < 100; i++ {
		if syscall.Kill(childPID, 0) != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("child %d survived Stop", childPID)
}

// A replica that exits takes what it started with it, as a container's
// first process does: a crashed server's workers would otherwise hold its
// port against the replica started again.
func TestAnExitedReplicaLeavesNothingRunning(t *testing.T) {
	d := New(Config{Dir: t.TempDir()})
	fifo := proctest.PidFIFO(t)
	task, err := d.Start(context.Background(), runtime.Spec{ReplicaID: "r", Env: map[string]string{"PIDFIFO": fifo},
		Command: []string{"sh", "-c", `sleep 300 & echo $! > "$PIDFIFO"; exit 3`}})
	if err != nil {
		t.Fatal(err)
	}
	childPID := proctest.ReadPid(t, fifo, 10*time.Second)
	<-task.Done()
	if !proctest.Gone(childPID, 10*time.Second) {
		_ = syscall.Kill(childPID, syscall.SIGKILL)
		t.Fatalf("child %d outlived its replica", childPID)
	}
}

func TestCommandNotFoundIsAClearError(t *testing.T) {
	d := New(Config{Dir: t.TempDir()})
	_, err := d.Start(context.Background(), runtime.Spec{ReplicaID: "r", Command: []string{"no-such-command-xyz"}})
	if err == nil || !strings.Contains(err.Error(), `command "no-such-command-xyz" not found`) {
		t.Fatalf("got %v", err)
	}
}

func TestExtraPathResolvesFirst(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "mytool"), []byte("#!/bin/sh\necho from-extra-path\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	task, err := New(Config{Dir: dir, ExtraPath: bin}).Start(context.Background(), runtime.Spec{ReplicaID: "r", Command: []string{"mytool"}})
	if err != nil {
		t.Fatal(err)
	}
	<-task.Done()
	out, _ := os.ReadFile(filepath.Join(dir, "r", "output.log"))
	if string(out) != "from-extra-path\n" {
		t.Fatalf("stdout %q", out)
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}
