package member

import (
	"errors"
	"os/exec"
	goruntime "runtime"
	"sync"
	"syscall"
)

// Child is the software process a capability runs. It is in a process
// group of its own and gets SIGKILL when the member dies, so a killed
// machine leaves none of it serving.
type Child struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// NewChild is a child not started yet.
func NewChild() *Child {
	done := make(chan struct{})
	close(done)
	return &Child{exited: done}
}

// Start starts cmd (whose SysProcAttr may carry a Credential). The
// parent-death signal follows the thread that started the process, so
// that thread stays locked until the process exits.
func (c *Child) Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Pdeathsig = true, syscall.SIGKILL
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		goruntime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			close(exited)
			return
		}
		c.mu.Lock()
		c.cmd, c.exited = cmd, exited
		c.mu.Unlock()
		started <- nil
		_ = cmd.Wait()
		close(exited)
	}()
	return <-started
}

// Exited is closed once the process has exited (at once before a start).
func (c *Child) Exited() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exited
}

// Running reports whether the process runs.
func (c *Child) Running() bool {
	select {
	case <-c.Exited():
		return false
	default:
		return true
	}
}

// Signal signals the running process (its group, when group is true).
func (c *Child) Signal(sig syscall.Signal, group bool) error {
	c.mu.Lock()
	cmd := c.cmd
	c.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return errors.New("not started")
	}
	pid := cmd.Process.Pid
	if group {
		pid = -pid
	}
	return syscall.Kill(pid, sig)
}
