package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/coder/websocket"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
)

func newExecCmd(g *globals) *cobra.Command {
	var stdin, tty bool
	cmd := &cobra.Command{
		Use:   "exec [-i] [-t] (REPLICA | service/NAME) -- COMMAND [ARG...]",
		Short: "Run a command in a replica (its container, or its directory and environment for a process), through the server",
		Args: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash != 1 || len(args) < 2 {
				return errors.New("want REPLICA -- COMMAND [ARG...]")
			}
			return nil
		},
		ValidArgsFunction: completeNames(g, "replicas"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			replica, err := oneReplica(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			conn, err := c.Exec(cmd.Context(), replica, client.ExecOptions{Command: args[1:], Stdin: stdin, TTY: tty})
			if err != nil {
				return err
			}
			defer conn.CloseNow()
			return runExec(cmd.Context(), g, conn, stdin, tty)
		},
	}
	cmd.Flags().BoolVarP(&stdin, "stdin", "i", false, "pass this terminal's input to the command")
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "run the command on a terminal (with -i, this one, in raw mode)")
	return cmd
}

// runExec relays the exec's frames to and from this process's streams
// and ends with the command's exit status.
func runExec(ctx context.Context, g *globals, conn *websocket.Conn, stdin, tty bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	in := int(os.Stdin.Fd())
	if tty && stdin && term.IsTerminal(in) {
		state, err := term.MakeRaw(in)
		if err != nil {
			return fmt.Errorf("raw terminal: %w", err)
		}
		defer func() { _ = term.Restore(in, state) }()
		go followTerminalSize(ctx, conn, in)
	}
	if stdin {
		go sendStdin(ctx, conn, os.Stdin)
	}
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) && ce.Reason != "" {
				return errors.New(ce.Reason)
			}
			return fmt.Errorf("the exec's stream ended before the command did: %w", err)
		}
		if len(data) == 0 {
			continue
		}
		switch data[0] {
		case api.ChannelStdout:
			_, _ = g.out.Write(data[1:])
		case api.ChannelStderr:
			_, _ = g.errOut.Write(data[1:])
		case api.ChannelStatus:
			var st api.ExecStatus
			if err := json.Unmarshal(data[1:], &st); err != nil {
				return fmt.Errorf("the exec's status: %w", err)
			}
			if st.Error != "" {
				return errors.New(st.Error)
			}
			if st.ExitCode != 0 {
				return &exitCode{code: st.ExitCode} // the command's own status, as kubectl exec
			}
			return nil
		}
	}
}

// sendStdin sends r as stdin frames, then says it ended.
func sendStdin(ctx context.Context, conn *websocket.Conn, r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if conn.Write(ctx, websocket.MessageBinary, append([]byte{api.ChannelStdin}, buf[:n]...)) != nil {
				return
			}
		}
		if err != nil {
			_ = conn.Write(ctx, websocket.MessageBinary, []byte{api.ChannelStdinClosed})
			return
		}
	}
}

// followTerminalSize sends the terminal's size now and on every change.
func followTerminalSize(ctx context.Context, conn *websocket.Conn, fd int) {
	changed := make(chan os.Signal, 1)
	signal.Notify(changed, syscall.SIGWINCH)
	defer signal.Stop(changed)
	for {
		if cols, rows, err := term.GetSize(fd); err == nil {
			data, _ := json.Marshal(api.TerminalSize{Cols: uint16(cols), Rows: uint16(rows)})
			if conn.Write(ctx, websocket.MessageBinary, append([]byte{api.ChannelResize}, data...)) != nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// oneReplica is the replica a REPLICA or service/NAME argument names:
// for a service, its first serving replica (running and healthy), else
// its first running one.
func oneReplica(ctx context.Context, c *client.Client, arg string) (string, error) {
	kind, name := "replicas", arg
	if k, n, err := splitKindName(arg); err == nil {
		kind, name = k, n
	}
	switch kind {
	case "replicas":
		return name, nil
	case "services":
	default:
		return "", fmt.Errorf("%s: want a replica or service/NAME", arg)
	}
	list, err := c.ListReplicas(ctx, name)
	if err != nil {
		return "", err
	}
	var running string
	for _, r := range list {
		if r.State != api.ReplicaRunning || r.RetiringSince != nil {
			continue
		}
		if r.Health == api.HealthHealthy || r.Health == "" {
			return r.ID, nil
		}
		if running == "" {
			running = r.ID
		}
	}
	if running != "" {
		return running, nil
	}
	if _, err := c.GetService(ctx, name); client.IsStatus(err, http.StatusNotFound) {
		return "", fmt.Errorf("no service named %q", name)
	}
	return "", fmt.Errorf("service %s has no running replica", name)
}

func newPortForwardCmd(g *globals) *cobra.Command {
	var address string
	cmd := &cobra.Command{
		Use:   "port-forward (REPLICA | service/NAME) [LOCAL:]PORT...",
		Short: "Reach a replica's ports on this host, through the server and the replica's machine (Ctrl-C ends it)",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			replica, err := oneReplica(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			var listeners []net.Listener
			defer func() {
				for _, l := range listeners {
					l.Close()
				}
			}()
			var wg sync.WaitGroup
			for _, spec := range args[1:] {
				local, remote, err := parseForward(spec)
				if err != nil {
					return err
				}
				l, err := net.Listen("tcp", net.JoinHostPort(address, local))
				if err != nil {
					return fmt.Errorf("listen for %s: %w", spec, err)
				}
				listeners = append(listeners, l)
				fmt.Fprintf(g.out, "Forwarding from %s -> %s\n", l.Addr(), remote)
				wg.Add(1)
				go func() {
					defer wg.Done()
					forwardConnections(cmd.Context(), g, c, l, replica, remote)
				}()
			}
			<-cmd.Context().Done()
			for _, l := range listeners {
				l.Close()
			}
			wg.Wait()
			return nil
		},
	}
	cmd.Flags().StringVar(&address, "address", "127.0.0.1", "address to listen on (localhost only by default)")
	return cmd
}

// parseForward reads [LOCAL:]REMOTE (LOCAL 0: any free port).
func parseForward(spec string) (local, remote string, err error) {
	local, remote, found := strings.Cut(spec, ":")
	if !found {
		local, remote = spec, spec
	}
	if remote == "" {
		return "", "", fmt.Errorf("%q: want [LOCAL:]PORT, such as 8080 or 9000:http", spec)
	}
	if local == "" {
		local = "0"
	}
	if _, err := net.LookupPort("tcp", local); err != nil {
		return "", "", fmt.Errorf("%q: local port %q: %w", spec, local, err)
	}
	return local, remote, nil
}

// forwardConnections forwards each connection l accepts to the
// replica's port, until l is closed.
func forwardConnections(ctx context.Context, g *globals, c *client.Client, l net.Listener, replica, remote string) {
	for {
		local, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer local.Close()
			stream, err := c.PortForward(ctx, replica, remote)
			if err != nil {
				fmt.Fprintf(g.errOut, "forward to %s port %s: %v\n", replica, remote, oneLine(err.Error()))
				return
			}
			defer stream.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(stream, local); done <- struct{}{} }()
			go func() { _, _ = io.Copy(local, stream); done <- struct{}{} }()
			select {
			case <-done:
			case <-ctx.Done():
			}
		}()
	}
}
