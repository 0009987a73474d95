package client

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/coder/websocket"
)

// ExecOptions are an exec's: its command, whether it reads stdin, and
// whether it runs on a terminal.
type ExecOptions struct {
	Command []string
	Stdin   bool
	TTY     bool
}

// Exec opens an exec of a command in a replica: a WebSocket whose
// binary messages carry api.Channel* frames (the replica's machine runs
// the command; the server relays).
func (c *Client) Exec(ctx context.Context, replicaID string, opts ExecOptions) (*websocket.Conn, error) {
	q := url.Values{"command": opts.Command, "stdin": {strconv.FormatBool(opts.Stdin)}, "tty": {strconv.FormatBool(opts.TTY)}}
	return c.DialStream(ctx, "", "/v1/replicas/"+url.PathEscape(replicaID)+"/exec?"+q.Encode())
}

// PortForward opens one connection to a replica's port (a name of its
// ports, or a number), relayed by its machine's agent and the server.
func (c *Client) PortForward(ctx context.Context, replicaID, port string) (net.Conn, error) {
	conn, err := c.DialStream(ctx, "", "/v1/replicas/"+url.PathEscape(replicaID)+"/portforward?port="+url.QueryEscape(port))
	if err != nil {
		return nil, err
	}
	return websocket.NetConn(context.WithoutCancel(ctx), conn, websocket.MessageBinary), nil
}

// DialStream opens a WebSocket to path on server (the client's current
// server when ""), with the client's token. A refused handshake is the
// API's error.
func (c *Client) DialStream(ctx context.Context, server, path string) (*websocket.Conn, error) {
	if server == "" {
		server = c.BaseURL()
	}
	hc := *c.http
	hc.Timeout = 0 // a stream lasts as long as ctx
	header := http.Header{}
	if c.token != "" {
		header.Set("Authorization", "Bearer "+c.token)
	}
	conn, resp, err := websocket.Dial(ctx, server+path, &websocket.DialOptions{HTTPClient: &hc, HTTPHeader: header})
	if err != nil {
		if resp != nil && resp.StatusCode >= 400 {
			return nil, errorResponse(resp, "stream "+path)
		}
		return nil, fmt.Errorf("stream %s: %w", path, err)
	}
	conn.SetReadLimit(-1) // a terminal's output is not bounded; frames are
	return conn, nil
}
