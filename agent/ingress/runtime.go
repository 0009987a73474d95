package ingress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
)

// runtimeAPI sends commands to an HAProxy CLI socket (the runtime API
// or the master CLI), one connection each, and stops at the first that
// HAProxy refuses.
func runtimeAPI(ctx context.Context, socket string, cmds []string) error {
	for _, cmd := range cmds {
		if err := command(ctx, socket, cmd); err != nil {
			return err
		}
	}
	return nil
}

// command runs one command. "set server … addr" answers what changed;
// the other set commands answer nothing unless they fail.
func command(ctx context.Context, socket, cmd string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return fmt.Errorf("HAProxy socket: %w", err)
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if _, err := io.WriteString(conn, cmd+"\n"); err != nil {
		return fmt.Errorf("HAProxy socket: %w", err)
	}
	out, err := io.ReadAll(conn)
	if err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		return fmt.Errorf("HAProxy socket: %w", err)
	}
	answer := strings.TrimSpace(string(out))
	switch {
	case answer == "" || !strings.HasPrefix(cmd, "set "):
		return nil
	case strings.Contains(cmd, " addr ") && (strings.Contains(answer, "changed from") || strings.Contains(answer, "no need to change")):
		return nil
	}
	return fmt.Errorf("HAProxy refused %q: %s", cmd, answer)
}

func isReset(err error) bool {
	return strings.Contains(err.Error(), "connection reset")
}

// workerPID is the process id of the worker answering the runtime API.
func workerPID(ctx context.Context, socket string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if _, err := io.WriteString(conn, "show info\n"); err != nil {
		return "", err
	}
	scanner := bufio.NewScanner(conn)
	for scanner.Scan() {
		if pid, ok := strings.CutPrefix(scanner.Text(), "Pid: "); ok {
			return pid, nil
		}
	}
	return "", fmt.Errorf("no Pid in HAProxy's show info: %w", errors.Join(scanner.Err(), io.ErrUnexpectedEOF))
}
