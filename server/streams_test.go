package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
)

// agentStream plays the agent of m1: it takes the next request from the
// long poll and opens its stream back to the server.
func agentStream(t *testing.T, ctx context.Context, agent *client.Client, kind string) (api.LogRequest, *websocket.Conn) {
	t.Helper()
	reqs, err := agent.LogRequests(ctx, "m1")
	if err != nil || len(reqs) != 1 || reqs[0].Kind != kind {
		t.Fatalf("the agent's poll: %+v %v, want one %s request", reqs, err, kind)
	}
	conn, err := agent.DialStream(ctx, "", "/v1/machines/m1/streams/"+reqs[0].ID)
	if err != nil {
		t.Fatalf("the agent's stream: %v", err)
	}
	return reqs[0], conn
}

func readFrame(t *testing.T, ctx context.Context, conn *websocket.Conn) (byte, string) {
	t.Helper()
	_, data, err := conn.Read(ctx)
	if err != nil || len(data) == 0 {
		t.Fatalf("read a frame: %q %v", data, err)
	}
	return data[0], string(data[1:])
}

// An exec reaches the replica's agent through the long poll; the agent's
// stream back is relayed to the caller frame by frame, both ways, with
// the command's status last. It is audited; a read-only token may not
// exec, and a machine cannot answer another machine's stream.
func TestExecIsRelayedBetweenTheCallerAndTheAgent(t *testing.T) {
	ts, _ := withTestCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agent := client.New(ts.URL(), ts.joinManual(t, "dev", "m1"), ts.http)
	applyWebOnM1(t, ts)

	caller, err := ts.admin.Exec(ctx, "web-0", client.ExecOptions{Command: []string{"cat", "-n"}, Stdin: true})
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	defer caller.CloseNow()
	req, conn := agentStream(t, ctx, agent, api.StreamExec)
	defer conn.CloseNow()
	if strings.Join(req.Command, " ") != "cat -n" || !req.Stdin || req.ReplicaID != "web-0" {
		t.Fatalf("the agent was asked %+v", req)
	}
	if err := caller.Write(ctx, websocket.MessageBinary, append([]byte{api.ChannelStdin}, "hello\n"...)); err != nil {
		t.Fatal(err)
	}
	if ch, data := readFrame(t, ctx, conn); ch != api.ChannelStdin || data != "hello\n" {
		t.Fatalf("the agent got %d %q, want the caller's stdin", ch, data)
	}
	status, _ := json.Marshal(api.ExecStatus{ExitCode: 3})
	for _, frame := range [][]byte{append([]byte{api.ChannelStdout}, "     1\thello\n"...), append([]byte{api.ChannelStatus}, status...)} {
		if err := conn.Write(ctx, websocket.MessageBinary, frame); err != nil {
			t.Fatal(err)
		}
	}
	if ch, data := readFrame(t, ctx, caller); ch != api.ChannelStdout || data != "     1\thello\n" {
		t.Fatalf("the caller got %d %q, want the command's output", ch, data)
	}
	if ch, data := readFrame(t, ctx, caller); ch != api.ChannelStatus || !strings.Contains(data, `"exitCode":3`) {
		t.Fatalf("the caller got %d %q, want the exit status", ch, data)
	}
	events, err := ts.admin.ListEvents(ctx, client.EventQuery{Kind: "Audit"})
	if err != nil {
		t.Fatal(err)
	}
	audited := false
	for _, e := range events {
		audited = audited || strings.Contains(e.Message, "exec in replica web-0: cat -n")
	}
	if !audited {
		t.Errorf("no audit event of the exec among %+v", events)
	}

	// A read-only token reads but does not exec.
	tok, err := ts.admin.CreateToken(ctx, api.TokenRequest{Kind: api.TokenReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.New(ts.URL(), tok.Secret, ts.http).Exec(ctx, "web-0", client.ExecOptions{Command: []string{"sh"}})
	if !client.IsStatus(err, http.StatusForbidden) {
		t.Errorf("exec with a read-only token: %v, want 403", err)
	}
	// Another machine's credential cannot take m1's stream.
	other := client.New(ts.URL(), ts.joinManual(t, "dev", "m2"), ts.http)
	if _, err := other.DialStream(ctx, "", "/v1/machines/m1/streams/anything"); !client.IsStatus(err, http.StatusForbidden) {
		t.Errorf("m2 opening m1's stream: %v, want 403", err)
	}
}

// A port-forward carries the connection's bytes both ways.
func TestPortForwardIsRelayed(t *testing.T) {
	ts, _ := withTestCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agent := client.New(ts.URL(), ts.joinManual(t, "dev", "m1"), ts.http)
	applyWebOnM1(t, ts)
	local, err := ts.admin.PortForward(ctx, "web-0", "http")
	if err != nil {
		t.Fatalf("port-forward: %v", err)
	}
	defer local.Close()
	req, conn := agentStream(t, ctx, agent, api.StreamForward)
	if req.Port != "http" {
		t.Fatalf("the agent was asked for port %q", req.Port)
	}
	remote := websocket.NetConn(ctx, conn, websocket.MessageBinary)
	if _, err := local.Write([]byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 18)
	if _, err := io.ReadFull(remote, buf); err != nil || string(buf) != "GET / HTTP/1.0\r\n\r\n" {
		t.Fatalf("the replica's side read %q %v", buf, err)
	}
	if _, err := remote.Write([]byte("HTTP/1.0 200 OK\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	remote.Close()
	got, err := io.ReadAll(local)
	if err != nil || string(got) != "HTTP/1.0 200 OK\r\n\r\n" {
		t.Fatalf("the caller read %q %v", got, err)
	}
}
