package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/gantry-dev/gantry/internal/atomicfile"
	"github.com/gantry-dev/gantry/runtime"
	"github.com/moby/moby/api/pkg/stdcopy"
)

// A container's output goes with the container, which the driver
// removes when the replica stops or starts again. Before that, the end of
// its output (PreviousLogBytes) is kept in PreviousLogsDir for logs
// --previous, as the kubelet keeps a Pod's last terminated container.

// previousPath is where the kept output of a container name lies.
func (d *Driver) previousPath(name string) string {
	return filepath.Join(d.cfg.PreviousLogsDir, name+".log")
}

// keepPrevious saves the end of a container's output before it is
// removed (nothing when the driver keeps none, or there is no such
// container).
func (d *Driver) keepPrevious(ctx context.Context, container, name string) error {
	if d.cfg.PreviousLogsDir == "" {
		return nil
	}
	rc, err := d.cli.ContainerLogs(ctx, container, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "all"})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("keep the output of %s: %w", name, err)
	}
	defer rc.Close()
	end := &tailBuffer{limit: d.cfg.PreviousLogBytes}
	if _, err := stdcopy.StdCopy(end, end, rc); err != nil {
		return fmt.Errorf("keep the output of %s: %w", name, err)
	}
	if err := os.MkdirAll(d.cfg.PreviousLogsDir, 0o700); err != nil {
		return fmt.Errorf("keep the output of %s: %w", name, err)
	}
	return atomicfile.WriteFrom(d.previousPath(name), bytes.NewReader(end.Bytes()), 0o600)
}

// previousLogs reads the kept output of a replica's last container.
func (d *Driver) previousLogs(machineID, replicaID string) (io.ReadCloser, error) {
	f, err := os.Open(d.previousPath(ContainerName(machineID, replicaID)))
	if errors.Is(err, os.ErrNotExist) || d.cfg.PreviousLogsDir == "" {
		return nil, runtime.NoPreviousError(replicaID)
	}
	return f, err
}

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	limit int64
	buf   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if int64(len(t.buf)) > 2*t.limit { // compact now and then, not per write
		t.buf = append(t.buf[:0], t.Bytes()...)
	}
	return len(p), nil
}

func (t *tailBuffer) Bytes() []byte {
	if over := int64(len(t.buf)) - t.limit; over > 0 {
		return t.buf[over:]
	}
	return t.buf
}
