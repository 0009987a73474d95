package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/coder/websocket"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/runtime"
)

// serveStream answers an exec or port-forward request: it opens a
// WebSocket back to the server that holds the caller's, then runs the
// command in the replica, or connects to its port.
func (a *Agent) serveStream(ctx context.Context, req api.LogRequest) {
	conn, err := a.dialStream(ctx, req.ID)
	if err != nil {
		a.log.Warn("stream not opened", "replica", req.ReplicaID, "kind", req.Kind, "err", err)
		return
	}
	defer conn.CloseNow()
	conn.SetReadLimit(-1)
	task, ports, err := a.runningTask(req.ReplicaID)
	switch {
	case err != nil && req.Kind == api.StreamExec:
		sendStatus(ctx, conn, api.ExecStatus{ExitCode: -1, Error: err.Error()})
	case err != nil:
		_ = conn.Close(websocket.StatusPolicyViolation, truncate(err.Error()))
	case req.Kind == api.StreamExec:
		a.execOver(ctx, conn, task, req)
	case req.Kind == api.StreamForward:
		a.forwardOver(ctx, conn, task, ports, req)
	default:
		_ = conn.Close(websocket.StatusUnsupportedData, "unknown stream kind "+req.Kind)
	}
}

// dialStream opens the stream on the server that waits for it: the one
// polled first, else the others (a server that holds no such stream
// answers 410).
func (a *Agent) dialStream(ctx context.Context, id string) (*websocket.Conn, error) {
	stream := a.client.WithHTTPClient(&http.Client{Transport: a.transport})
	path := "/v1/machines/" + url.PathEscape(a.machineID) + "/streams/" + url.PathEscape(id)
	var errs []error
	for _, server := range stream.Servers() {
		conn, err := stream.DialStream(ctx, server, path)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if !client.IsStatus(err, http.StatusGone) {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// runningTask is the replica's task now, and its ports.
func (a *Agent) runningTask(replicaID string) (runtime.Task, map[string]int, error) {
	a.mu.Lock()
	s, ok := a.supervisors[replicaID]
	a.mu.Unlock()
	if !ok {
		return nil, nil, fmt.Errorf("replica %s does not run on machine %s", replicaID, a.machineID)
	}
	task := s.running()
	if task == nil {
		return nil, nil, fmt.Errorf("replica %s is not running now (restarting or stopping)", replicaID)
	}
	return task, s.assignmentPorts(), nil
}

// execOver runs the command with the stream's frames as its standard
// streams, and sends how it ended.
func (a *Agent) execOver(ctx context.Context, conn *websocket.Conn, task runtime.Task, req api.LogRequest) {
	execer, ok := task.(runtime.StreamExecer)
	if !ok {
		sendStatus(ctx, conn, api.ExecStatus{ExitCode: -1, Error: "the " + a.driver.Name() + " runtime cannot exec"})
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stdinR, stdinW := io.Pipe()
	resize := make(chan runtime.TermSize, 1)
	go readCallerFrames(ctx, cancel, conn, stdinW, resize)
	streams := runtime.ExecStreams{Stdout: frameWriter{ctx, conn, api.ChannelStdout}, Stderr: frameWriter{ctx, conn, api.ChannelStderr}, TTY: req.TTY, Resize: resize}
	if req.Stdin {
		streams.Stdin = stdinR
	}
	a.log.Info("exec in replica", "replica", req.ReplicaID, "command", req.Command[0], "tty", req.TTY)
	code, err := execer.ExecStream(ctx, req.Command, streams)
	status := api.ExecStatus{ExitCode: code}
	if err != nil {
		status.Error = err.Error()
	}
	sendStatus(ctx, conn, status)
}

// readCallerFrames feeds stdin and resizes from the caller; the caller
// leaving ends the exec.
func readCallerFrames(ctx context.Context, cancel context.CancelFunc, conn *websocket.Conn, stdin *io.PipeWriter, resize chan<- runtime.TermSize) {
	defer cancel()
	defer stdin.Close()
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return
		}
		if len(data) == 0 {
			continue
		}
		switch data[0] {
		case api.ChannelStdin:
			if _, err := stdin.Write(data[1:]); err != nil {
				return
			}
		case api.ChannelStdinClosed:
			stdin.Close()
		case api.ChannelResize:
			var size api.TerminalSize
			if json.Unmarshal(data[1:], &size) == nil {
				select {
				case resize <- runtime.TermSize{Cols: size.Cols, Rows: size.Rows}:
				default: // a newer size follows
				}
			}
		}
	}
}

// frameWriter writes what it is given as frames of one channel.
type frameWriter struct {
	ctx     context.Context
	conn    *websocket.Conn
	channel byte
}

func (f frameWriter) Write(p []byte) (int, error) {
	if err := f.conn.Write(f.ctx, websocket.MessageBinary, append([]byte{f.channel}, p...)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func sendStatus(ctx context.Context, conn *websocket.Conn, st api.ExecStatus) {
	data, _ := json.Marshal(st)
	if err := conn.Write(ctx, websocket.MessageBinary, append([]byte{api.ChannelStatus}, data...)); err == nil {
		_ = conn.Close(websocket.StatusNormalClosure, "")
	}
}

// forwardOver connects the stream to the replica's port.
func (a *Agent) forwardOver(ctx context.Context, conn *websocket.Conn, task runtime.Task, ports map[string]int, req api.LogRequest) {
	addr, err := portAddress(task, ports, req.Port)
	if err != nil {
		_ = conn.Close(websocket.StatusPolicyViolation, truncate(err.Error()))
		return
	}
	var d net.Dialer
	target, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		_ = conn.Close(websocket.StatusInternalError, truncate(fmt.Sprintf("replica %s port %s (%s): %v", req.ReplicaID, req.Port, addr, err)))
		return
	}
	defer target.Close()
	stream := websocket.NetConn(ctx, conn, websocket.MessageBinary)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(target, stream); closeWrite(target); done <- struct{}{} }()
	go func() { _, _ = io.Copy(stream, target); _ = stream.Close(); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if tcp, ok := c.(*net.TCPConn); ok {
		_ = tcp.CloseWrite()
	}
}

// portAddress is where the agent reaches the replica's port: a port name,
// or a number (a declared port's container port, or a host port).
func portAddress(task runtime.Task, ports map[string]int, port string) (string, error) {
	name := port
	if n, err := strconv.Atoi(port); err == nil {
		name = ""
		for pname, p := range ports {
			if p == n && p > 0 {
				name = pname
			}
		}
		for pname, p := range task.HostPorts() {
			if name == "" && p == n {
				name = pname
			}
		}
	}
	if name != "" {
		if addr, ok := task.Endpoint(name); ok {
			return addr, nil
		}
	}
	var known []string
	for pname := range ports {
		known = append(known, fmt.Sprintf("%s (%s)", pname, describePort(task, ports, pname)))
	}
	sort.Strings(known)
	return "", fmt.Errorf("the replica has no port %q (its ports: %s)", port, strings.Join(known, ", "))
}

func describePort(task runtime.Task, ports map[string]int, name string) string {
	var parts []string
	if p := ports[name]; p > 0 {
		parts = append(parts, "container port "+strconv.Itoa(p))
	}
	if p, ok := task.HostPorts()[name]; ok {
		parts = append(parts, "host port "+strconv.Itoa(p))
	}
	return strings.Join(parts, ", ")
}

// truncate keeps a close reason within WebSocket's 123 bytes.
func truncate(s string) string {
	if len(s) > 120 {
		return s[:120]
	}
	return s
}
