package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// PostgreSQL refuses to start while its lock files (postmaster.pid in the
// data directory, .s.PGSQL.<port>.lock beside the socket) name a process
// that exists, whoever that process is. A postmaster killed with SIGKILL
// leaves them behind, and on a busy host its pid is soon given to another
// process: when that process belongs to PostgreSQL's user (another
// member's server, a backend of the control plane's own database), the
// server would refuse to start for as long as it lives, and the member
// would never serve again. Patroni checks the pid file the same way
// before it starts PostgreSQL.

// lockFiles are the lock files of this member's server.
func (p *Postgres) lockFiles() []string {
	return []string{
		filepath.Join(p.dataDir(), "postmaster.pid"),
		filepath.Join(p.socketDir(), fmt.Sprintf(".s.PGSQL.%d.lock", p.cfg.Port)),
	}
}

// clearLeftovers makes way for a new postmaster: a postmaster of this
// data directory that outlived the member that started it is stopped
// (the member that runs now owns the data), and a lock file whose pid
// names no such postmaster is removed.
func (p *Postgres) clearLeftovers(ctx context.Context) error {
	for _, file := range p.lockFiles() {
		pid, err := lockOwner(file)
		if err != nil {
			return err
		}
		if pid == 0 {
			continue
		}
		if p.isOurPostmaster(pid) {
			p.cfg.Log.Warn("a postmaster of this data directory outlived its member: stopping it", "pid", pid)
			if err := p.stopLeftover(ctx, pid); err != nil {
				return err
			}
		}
		if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove the stale lock file %s: %w", file, err)
		}
	}
	return nil
}

// lockOwner is the pid on a lock file's first line (0 when there is no
// file or no pid in it).
func lockOwner(file string) (int, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the lock file %s: %w", file, err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, nil
	}
	return pid, nil
}

// isOurPostmaster reports whether pid is a postmaster started on this
// member's data directory: its command line is the one start gives it
// (backends rename themselves "postgres: …", a postmaster keeps it).
func (p *Postgres) isOurPostmaster(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	if len(args) < 3 || filepath.Base(args[0]) != "postgres" {
		return false
	}
	for i := 1; i+1 < len(args); i++ {
		if args[i] == "-D" && filepath.Clean(args[i+1]) == filepath.Clean(p.dataDir()) {
			return true
		}
	}
	return false
}

// stopLeftover stops a postmaster this member did not start: an
// immediate shutdown, then SIGKILL after StopTimeout, until it is gone.
func (p *Postgres) stopLeftover(ctx context.Context, pid int) error {
	_ = syscall.Kill(pid, syscall.SIGQUIT)
	killAt := time.Now().Add(p.cfg.StopTimeout)
	for p.isOurPostmaster(pid) {
		if time.Now().After(killAt) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stop the leftover postmaster %d: %w", pid, ctx.Err())
		case <-time.After(p.cfg.ReadyPoll):
		}
	}
	return nil
}
