package procgroup

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/internal/proctest"
)

// limit bounds every wait on a process in these tests.
const limit = 10 * time.Second

// startShell starts script under sh as a group leader; the script writes
// the pid of the child it leaves behind into the FIFO named by $PIDFIFO.
func startShell(t *testing.T, script string) (l *Leader, fifo string) {
	t.Helper()
	fifo = proctest.PidFIFO(t)
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "PIDFIFO="+fifo)
	l, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Signal(syscall.SIGKILL); <-l.Done() })
	return l, fifo
}

func waitDone(t *testing.T, l *Leader) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(limit):
		t.Fatalf("the leader was not reaped within %s", limit)
	}
}

func TestWhatTheLeaderLeftDiesBeforeItIsReaped(t *testing.T) {
	l, fifo := startShell(t, `sleep 300 & echo $! > "$PIDFIFO"`)
	child := proctest.ReadPid(t, fifo, limit)
	waitDone(t, l)
	if err := l.Err(); err != nil {
		t.Fatalf("the leader exited 0, Err says %v", err)
	}
	if !proctest.Gone(child, limit) {
		_ = syscall.Kill(child, syscall.SIGKILL)
		t.Fatalf("the leader's child %d still runs after the leader was reaped", child)
	}
}

func TestSignalReachesTheGroupWhileTheLeaderLives(t *testing.T) {
	l, fifo := startShell(t, `sleep 300 & echo $! > "$PIDFIFO"; wait`)
	child := proctest.ReadPid(t, fifo, limit)
	if proctest.Gone(child, 0) {
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
	if !proctest.Gone(child, limit) {
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
