package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gantry-dev/gantry/runtime"
)

// logPath is the one file a replica's stdout and stderr go to, across
// restarts.
func (d *Driver) logPath(replicaID string) string {
	return filepath.Join(d.ReplicaDir(replicaID), "output.log")
}

// Logs returns the replica's output: the last opts.Tail lines, then, when
// following, what is written after, until ctx ends or the reader is closed.
func (d *Driver) Logs(ctx context.Context, _ string, replicaID string, opts runtime.LogOptions) (io.ReadCloser, error) {
	f, err := os.Open(d.logPath(replicaID))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("replica %s has no output on this machine", replicaID)
	}
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	if opts.Tail >= 0 {
		if err := seekTail(f, opts.Tail); err != nil {
			f.Close()
			return nil, err
		}
	}
	if !opts.Follow {
		return f, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	return &followReader{ctx: ctx, cancel: cancel, f: f, poll: d.cfg.LogPollInterval}, nil
}

// seekTail positions f at the start of its last n lines.
func seekTail(f *os.File, n int) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	end := info.Size()
	if n == 0 {
		_, err = f.Seek(end, io.SeekStart)
		return err
	}
	const block = 32 << 10
	newlines := 0
	for pos := end; pos > 0; {
		size := min(int64(block), pos)
		pos -= size
		buf := make([]byte, size)
		if _, err := f.ReadAt(buf, pos); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		for i := len(buf) - 1; i >= 0; i-- {
			if buf[i] != '\n' || pos+int64(i) == end-1 {
				continue
			}
			if newlines++; newlines == n {
				_, err := f.Seek(pos+int64(i)+1, io.SeekStart)
				return err
			}
		}
	}
	_, err = f.Seek(0, io.SeekStart)
	return err
}

// followReader reads a growing file, like tail -f.
type followReader struct {
	ctx    context.Context
	cancel context.CancelFunc
	f      *os.File
	poll   time.Duration
}

func (r *followReader) Read(p []byte) (int, error) {
	for {
		n, err := r.f.Read(p)
		if n > 0 || (err != nil && !errors.Is(err, io.EOF)) {
			return n, err
		}
		select {
		case <-r.ctx.Done():
			return 0, io.EOF
		case <-time.After(r.poll):
		}
	}
}

func (r *followReader) Close() error {
	r.cancel()
	return r.f.Close()
}
