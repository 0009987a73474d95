package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gantry-dev/gantry/internal/atomicfile"
	"github.com/gantry-dev/gantry/runtime"
)

// logPath is the file the running instance's stdout and stderr go to;
// previousPath keeps the end of the instance before it.
func (d *Driver) logPath(replicaID string) string {
	return filepath.Join(d.ReplicaDir(replicaID), "output.log")
}

func (d *Driver) previousPath(replicaID string) string {
	return filepath.Join(d.ReplicaDir(replicaID), "previous.log")
}

// keepPrevious moves the output of the instance that ended (its last
// limit bytes) to previous, so each start writes a log of its own.
func keepPrevious(current, previous string, limit int64) error {
	f, err := os.Open(current)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("keep the previous output: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("keep the previous output: %w", err)
	}
	if skip := info.Size() - limit; skip > 0 {
		if _, err := f.Seek(skip, io.SeekStart); err != nil {
			return fmt.Errorf("keep the previous output: %w", err)
		}
	}
	if err := atomicfile.WriteFrom(previous, f, 0o600); err != nil {
		return fmt.Errorf("keep the previous output: %w", err)
	}
	return os.Remove(current)
}

// Logs returns the replica's output: the last opts.Tail lines, then, when
// following, what is written after, until ctx ends or the reader is closed.
func (d *Driver) Logs(ctx context.Context, _ string, replicaID string, opts runtime.LogOptions) (io.ReadCloser, error) {
	path := d.logPath(replicaID)
	if opts.Previous {
		path = d.previousPath(replicaID)
		opts.Follow = false // an ended instance writes nothing more
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && opts.Previous {
		return nil, runtime.NoPreviousError(replicaID)
	}
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
