package procgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startShell starts script under sh as a group leader; the script writes
// the pid of the child it leaves behind to the file named by $PIDFILE.
func startShell(t *testing.T, script string) (l *Leader, pidFile string) {
	t.Helper()
	pidFile = filepath.Join(t.TempDir(), "child.pid")
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "PIDFILE="+pidFile)
	l, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Signal(syscall.SIGKILL); <-l.Done() })
	return l, pidFile
}

func waitDone(t *testing.T, l *Leader) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the leader was not reaped within 30 s")
	}
}

// running: the process exists and is not a zombie (an orphan is reaped by
// whatever adopted it, maybe not at once).
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(after, "Z") && !strings.HasPrefix(after, "X")
}

// childPid is the pid the script wrote, once it did.
func childPid(t *testing.T, pidFile string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, err := os.ReadFile(pidFile)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && perr == nil {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("the script wrote no pid to %s within 10 s (%q, %v)", pidFile, data, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// diesWithin: the process ends within the limit (a kill is delivered
// when the process next runs, not when kill returns).
func diesWithin(pid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for running(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

func TestWhatTheLeaderLeftDiesBeforeItIsReaped(t *testing.T) {
	l, pidFile := startShell(t, "sleep 300 & echo $! > \"$PIDFILE.tmp\" && mv \"$PIDFILE.tmp\" \"$PIDFILE\"")
	waitDone(t, l)
	if err := l.Err(); err != nil {
		t.Fatalf("the leader exited 0, Err says %v", err)
	}
	child := childPid(t, pidFile)
	if !diesWithin(child, 10*time.Second) {
		_ = syscall.Kill(child, syscall.SIGKILL)
		t.Fatalf("the leader's child %d still runs after the leader was reaped", child)
	}
}

func TestSignalReachesTheGroupWhileTheLeaderLives(t *testing.T) {
	l, pidFile := startShell(t, "sleep 300 & echo $! > \"$PIDFILE.tmp\" && mv \"$PIDFILE.tmp\" \"$PIDFILE\"; wait")
	child := childPid(t, pidFile)
	if !running(child) {
		t.Fatalf("child %d is not running before the signal", child)
	}
	if !l.Signal(syscall.SIGTERM) {
		t.Fatal("Signal said the leader was reaped before it exited")
	}
	waitDone(t, l)
	var exit *exec.ExitError
	if !errors.As(l.Err(), &exit) {
		t.Fatalf("the leader ended with %v, want an exit error (killed by SIGTERM)", l.Err())
	}
	if !diesWithin(child, 10*time.Second) {
		t.Fatalf("child %d outlived the group's SIGTERM", child)
	}
	if l.Signal(syscall.SIGKILL) {
		t.Fatal("Signal sent to the group of a reaped leader, whose id may be another's now")
	}
}

func TestStartKeepsOtherAttributes(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exit 3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	l, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, l)
	if cmd.SysProcAttr.Pdeathsig != syscall.SIGKILL || !cmd.SysProcAttr.Setpgid {
		t.Fatalf("attributes %+v: want Pdeathsig kept and Setpgid set", cmd.SysProcAttr)
	}
	var exit *exec.ExitError
	if !errors.As(l.Err(), &exit) || exit.ExitCode() != 3 {
		t.Fatalf("Err = %v, want exit status 3", l.Err())
	}
}
