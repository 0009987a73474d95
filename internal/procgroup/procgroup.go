// Package procgroup runs a child as the leader of a process group of its
// own, and never signals another group by mistake.
//
// A group's id is its leader's pid. Once the leader is reaped that pid may
// be handed to a new process, which may lead a group of its own: a kill of
// the old group's id sent after the reap (to end what the leader left
// running) could land on strangers. A Leader is therefore reaped only
// after it has been seen to exit (waitid with WNOWAIT leaves it a zombie,
// whose pid the kernel keeps) and what is left of its group was killed,
// and a signal to the group is sent only while the leader is not reaped,
// under the same lock. Like a container's processes when its first one
// exits, what a leader started dies with it.
package procgroup

import (
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Leader is a started child leading its own process group.
type Leader struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error

	mu     sync.Mutex
	reaped bool
}

// Start starts cmd as the leader of a new process group (it sets
// SysProcAttr.Setpgid, keeping the other attributes) and follows it.
func Start(cmd *exec.Cmd) (*Leader, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Pgid = true, 0
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	l := &Leader{cmd: cmd, done: make(chan struct{})}
	go l.follow()
	return l, nil
}

// Pid is the leader's pid, the group's id.
func (l *Leader) Pid() int { return l.cmd.Process.Pid }

// Done is closed once the leader exited, its group was killed and the
// leader was reaped.
func (l *Leader) Done() <-chan struct{} { return l.done }

// Err is how the leader exited (exec.Cmd.Wait's error), once Done.
func (l *Leader) Err() error { return l.err }

// Signal sends sig to the whole group, unless the leader was reaped
// already (then the group was killed and its id may belong to others);
// it reports whether it sent it.
func (l *Leader) Signal(sig syscall.Signal) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reaped {
		return false
	}
	_ = syscall.Kill(-l.Pid(), sig)
	return true
}

// SignalLeader sends sig to the leader alone, unless it was reaped; it
// reports whether it sent it.
func (l *Leader) SignalLeader(sig syscall.Signal) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reaped {
		return false
	}
	_ = syscall.Kill(l.Pid(), sig)
	return true
}

// follow waits for the leader to exit without reaping it, kills what is
// left of its group while its id is still the group's, then reaps it.
func (l *Leader) follow() {
	pid := l.Pid()
	exited := waitExited(pid)
	l.mu.Lock()
	if exited == nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	l.err = l.cmd.Wait() // it fails too if waitExited did
	l.reaped = true
	l.mu.Unlock()
	close(l.done)
}

// waitExited blocks until the process exits, leaving it unreaped.
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait for process %d to exit: %w", pid, err)
		}
		return nil
	}
}
