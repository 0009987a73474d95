package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// task is one replica container.
type task struct {
	driver    *Driver
	id, name  string
	hostPorts map[string]int
	endpoints map[string]string
	stopWait  context.CancelFunc

	done chan struct{}
	err  error
}

// watch closes done when the container stops running, with why.
func (t *task) watch(wait client.ContainerWaitResult) {
	defer close(t.done)
	defer t.stopWait()
	select {
	case res := <-wait.Result:
		t.err = t.exitError(res)
	case err := <-wait.Error:
		if cerrdefs.IsNotFound(err) {
			t.err = errors.New("container was removed")
			return
		}
		t.err = fmt.Errorf("waiting for container: %w", err)
	}
}

func (t *task) exitError(res container.WaitResponse) error {
	ctx, cancel := context.WithTimeout(context.Background(), t.driver.cfg.RequestTimeout)
	defer cancel()
	oom := false
	if inspected, err := t.driver.cli.ContainerInspect(ctx, t.id, client.ContainerInspectOptions{}); err == nil && inspected.Container.State != nil {
		oom = inspected.Container.State.OOMKilled
	}
	switch {
	case oom:
		return fmt.Errorf("killed for exceeding its memory limit (exit code %d)", res.StatusCode)
	case res.Error != nil && res.Error.Message != "":
		return fmt.Errorf("exit code %d: %s", res.StatusCode, res.Error.Message)
	case res.StatusCode != 0:
		return fmt.Errorf("exit code %d", res.StatusCode)
	}
	return nil
}

func (t *task) Done() <-chan struct{}     { return t.done }
func (t *task) ExitError() error          { return t.err }
func (t *task) HostPorts() map[string]int { return t.hostPorts }

func (t *task) Endpoint(port string) (string, bool) {
	ep, ok := t.endpoints[port]
	return ep, ok
}

// Stop stops the container gracefully (SIGTERM, then SIGKILL after
// timeout) and removes it.
func (t *task) Stop(ctx context.Context, timeout time.Duration) error {
	secs := int(timeout.Seconds())
	stopCtx, cancel := context.WithTimeout(ctx, timeout+t.driver.cfg.RequestTimeout)
	defer cancel()
	_, err := t.driver.cli.ContainerStop(stopCtx, t.id, client.ContainerStopOptions{Timeout: &secs})
	if err != nil && !cerrdefs.IsNotFound(err) {
		err = fmt.Errorf("stop container %s: %w", t.name, err)
	} else {
		err = nil
	}
	rmCtx, cancelRm := context.WithTimeout(context.WithoutCancel(ctx), t.driver.cfg.RequestTimeout)
	defer cancelRm()
	if keepErr := t.driver.keepPrevious(rmCtx, t.id, t.name); keepErr != nil {
		err = errors.Join(err, keepErr)
	}
	if _, rmErr := t.driver.cli.ContainerRemove(rmCtx, t.id, client.ContainerRemoveOptions{Force: true}); rmErr != nil && !cerrdefs.IsNotFound(rmErr) {
		return errors.Join(err, fmt.Errorf("remove container %s: %w", t.name, rmErr))
	}
	removeSecretFiles(t.driver.cfg.SecretsDir, t.name)
	<-t.done
	return err
}

// Exec runs a command inside the container; non-zero exit is an error
// carrying the command's output.
func (t *task) Exec(ctx context.Context, command []string) error {
	created, err := t.driver.cli.ExecCreate(ctx, t.id, client.ExecCreateOptions{Cmd: command, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return fmt.Errorf("exec in container: %w", err)
	}
	attached, err := t.driver.cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return fmt.Errorf("exec in container: %w", err)
	}
	defer attached.Close()
	var out strings.Builder
	if _, err := stdcopy.StdCopy(&out, &out, io.LimitReader(attached.Reader, 64<<10)); err != nil && ctx.Err() != nil {
		return fmt.Errorf("exec in container: %w", ctx.Err())
	}
	inspected, err := t.driver.cli.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
	if err != nil {
		return fmt.Errorf("exec in container: %w", err)
	}
	if inspected.ExitCode != 0 {
		return fmt.Errorf("%s exited %d: %s", command[0], inspected.ExitCode, strings.TrimSpace(out.String()))
	}
	return nil
}
