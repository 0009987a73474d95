package docker

import (
	"context"
	"fmt"
	"io"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/gantry-dev/gantry/runtime"
)

// ExecStream runs command in the container with the caller's streams
// (docker exec -i [-t]): on a terminal when s.TTY, the output then
// unmultiplexed; resizes follow s.Resize.
func (t *task) ExecStream(ctx context.Context, command []string, s runtime.ExecStreams) (int, error) {
	created, err := t.driver.cli.ExecCreate(ctx, t.id, client.ExecCreateOptions{Cmd: command, TTY: s.TTY,
		AttachStdin: s.Stdin != nil, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return -1, fmt.Errorf("exec in container %s: %w", t.name, err)
	}
	attached, err := t.driver.cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{TTY: s.TTY})
	if err != nil {
		return -1, fmt.Errorf("exec in container %s: %w", t.name, err)
	}
	defer attached.Close()
	if s.Stdin != nil {
		go func() {
			_, _ = io.Copy(attached.Conn, s.Stdin)
			if !s.TTY { // a terminal ends its input with ^D; the engine ends a TTY exec at a half-close
				_ = attached.CloseWrite()
			}
		}()
	}
	stopResize := make(chan struct{})
	defer close(stopResize)
	go t.resizeExec(ctx, created.ID, s.Resize, stopResize)
	if s.TTY {
		_, err = io.Copy(s.Stdout, attached.Reader)
	} else {
		_, err = stdcopy.StdCopy(s.Stdout, s.Stderr, attached.Reader)
	}
	if err != nil && ctx.Err() != nil {
		return -1, ctx.Err()
	}
	inspected, err := t.driver.cli.ExecInspect(context.WithoutCancel(ctx), created.ID, client.ExecInspectOptions{})
	if err != nil {
		return -1, fmt.Errorf("exec in container %s: %w", t.name, err)
	}
	return inspected.ExitCode, nil
}

func (t *task) resizeExec(ctx context.Context, execID string, sizes <-chan runtime.TermSize, stop <-chan struct{}) {
	for {
		select {
		case size, ok := <-sizes:
			if !ok {
				return
			}
			_, _ = t.driver.cli.ExecResize(ctx, execID, client.ExecResizeOptions{Height: uint(size.Rows), Width: uint(size.Cols)})
		case <-stop:
			return
		}
	}
}
