// Package proctest lets tests wait on real processes by events rather than
// by polling: a FIFO a script writes a pid into, and a pidfd, which
// becomes readable once its process has ended.
package proctest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// PidFIFO makes a FIFO for a script to write a pid into (echo $! > FIFO)
// and returns its path.
func PidFIFO(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pid.fifo")
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatalf("mkfifo %s: %v", path, err)
	}
	return path
}

// ReadPid is the pid a script wrote into the FIFO, waiting at most limit
// for the script to write it.
func ReadPid(t testing.TB, fifo string, limit time.Duration) int {
	t.Helper()
	type read struct {
		data []byte
		err  error
	}
	done := make(chan read, 1)
	go func() {
		data, err := os.ReadFile(fifo) // opening blocks until the script opens it to write
		done <- read{data, err}
	}()
	select {
	case r := <-done:
		pid, err := strconv.Atoi(strings.TrimSpace(string(r.data)))
		if r.err != nil || err != nil {
			t.Fatalf("read a pid from %s: %q, %v", fifo, r.data, errors.Join(r.err, err))
		}
		return pid
	case <-time.After(limit):
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil { // lets the reader go
			w.Close()
		}
		t.Fatalf("no pid written to %s within %s", fifo, limit)
		return 0
	}
}

// Gone reports whether the process ended (a zombie has) within limit,
// waiting on its pidfd.
func Gone(pid int, limit time.Duration) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return errors.Is(err, unix.ESRCH)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(limit)
	for {
		n, err := unix.Poll(fds, int(max(time.Until(deadline).Milliseconds(), 0)))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0
	}
}
