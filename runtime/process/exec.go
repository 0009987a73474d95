package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"

	"github.com/creack/pty"

	"github.com/gantry-dev/gantry/runtime"
)

// ExecStream runs command as Exec does (on the host, in the replica's
// directory and environment), with the caller's streams: on a
// pseudo-terminal when s.TTY, else on pipes.
func (t *task) ExecStream(ctx context.Context, command []string, s runtime.ExecStreams) (int, error) {
	if len(command) == 0 {
		return -1, errors.New("empty command")
	}
	path, err := lookPath(command[0], envValue(t.env, "PATH"))
	if err != nil {
		return -1, err
	}
	cmd := exec.CommandContext(ctx, path, command[1:]...)
	cmd.Env, cmd.Dir = t.env, t.dir
	if s.TTY {
		err = runOnTerminal(cmd, s)
	} else {
		err = runOnPipes(cmd, s)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), nil
	case err != nil:
		return -1, err
	}
	return 0, nil
}

func runOnPipes(cmd *exec.Cmd, s runtime.ExecStreams) error {
	cmd.Stdout, cmd.Stderr = s.Stdout, s.Stderr
	if s.Stdin != nil {
		in, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		go func() {
			_, _ = io.Copy(in, s.Stdin)
			in.Close()
		}()
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", cmd.Args[0], err)
	}
	return cmd.Wait()
}

// runOnTerminal gives the command a pseudo-terminal: its output is read
// until the command has exited and the terminal drained.
func runOnTerminal(cmd *exec.Cmd, s runtime.ExecStreams) error {
	var size *pty.Winsize
	select { // a size already sent is the terminal's from the start
	case first, ok := <-s.Resize:
		if ok {
			size = &pty.Winsize{Cols: first.Cols, Rows: first.Rows}
		}
	default:
	}
	term, err := pty.StartWithSize(cmd, size)
	if err != nil {
		return fmt.Errorf("start %s on a terminal: %w", cmd.Args[0], err)
	}
	defer term.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(s.Stdout, term) // ends with EIO once the command and its children close it
	}()
	if s.Stdin != nil {
		go func() { _, _ = io.Copy(term, s.Stdin) }()
	}
	stopResize := make(chan struct{})
	defer close(stopResize)
	go resizeTerminal(term, s.Resize, stopResize)
	err = cmd.Wait()
	wg.Wait()
	return err
}

func resizeTerminal(term *os.File, sizes <-chan runtime.TermSize, stop <-chan struct{}) {
	for {
		select {
		case size, ok := <-sizes:
			if !ok {
				return
			}
			_ = pty.Setsize(term, &pty.Winsize{Cols: size.Cols, Rows: size.Rows})
		case <-stop:
			return
		}
	}
}
