package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/coder/websocket"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/internal/randid"
	"github.com/gantry-dev/gantry/server/relay"
	"github.com/gantry-dev/gantry/store"
)

// Exec and port-forward: the caller opens a WebSocket to any server;
// the server that the replica's agent polls (relayed to, as logs are)
// hands the agent the request through the same long poll as logs, the
// agent opens a WebSocket of its own back to that server, and the server
// relays the two, message by message. The agent is never reached
// directly, and acts only on what a caller's admin token asked for.

// handleExec runs a command in a replica: GET /v1/replicas/{id}/exec
// ?command=…&stdin=…&tty=… (a WebSocket of api.Channel* frames).
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := api.LogRequest{ID: randid.Hex(12), ReplicaID: r.PathValue("id"), Kind: api.StreamExec, Command: q["command"]}
	var err error
	if len(req.Command) == 0 {
		err = errorf(http.StatusBadRequest, "invalid", "command", "query parameter command: the command to run is required (gantry exec REPLICA -- COMMAND)")
	}
	for _, b := range []struct {
		name string
		into *bool
	}{{"stdin", &req.Stdin}, {"tty", &req.TTY}} {
		if v := q.Get(b.name); v != "" && err == nil {
			if *b.into, err = strconv.ParseBool(v); err != nil {
				err = errorf(http.StatusBadRequest, "invalid", b.name, "query parameter %s: want true or false, got %q", b.name, v)
			}
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.openStream(w, r, req, "exec in replica "+req.ReplicaID+": "+strings.Join(req.Command, " "))
}

// handlePortForward reaches a replica's port: GET /v1/replicas/{id}
// /portforward?port=NAME|NUMBER (a WebSocket of the connection's bytes).
func (s *Server) handlePortForward(w http.ResponseWriter, r *http.Request) {
	req := api.LogRequest{ID: randid.Hex(12), ReplicaID: r.PathValue("id"), Kind: api.StreamForward, Port: r.URL.Query().Get("port")}
	if req.Port == "" {
		s.writeError(w, r, errorf(http.StatusBadRequest, "invalid", "port", "query parameter port: a name of the replica's ports, or a number, is required"))
		return
	}
	s.openStream(w, r, req, "port-forward to replica "+req.ReplicaID+" port "+req.Port)
}

// openStream hands req to the agent of the replica's machine and relays
// its stream to the caller's.
func (s *Server) openStream(w http.ResponseWriter, r *http.Request, req api.LogRequest, what string) {
	machine, pod, err := s.machineRunning(r, req.ReplicaID)
	if err == nil && pod != nil {
		err = errorf(http.StatusNotImplemented, "unsupported", "", "replica %s is a Pod: use kubectl %s on its cluster", req.ReplicaID, map[string]string{api.StreamExec: "exec", api.StreamForward: "port-forward"}[req.Kind])
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.relayLogs(w, r, machine) {
		return
	}
	who, _ := r.Context().Value(principalKey{}).(principal)
	s.recordAudit(r.Context(), who, what)
	pending := s.streams.Open(req.ID, machine)
	defer s.streams.Close(req.ID)
	caller, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept answered the caller
	}
	defer caller.CloseNow()
	caller.SetReadLimit(-1)
	s.logs.Queue(machine, req)
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.LogAttachTimeout)
	defer cancel()
	var agent *websocket.Conn
	select {
	case agent = <-pending.Agent():
	case <-ctx.Done():
		_ = caller.Close(websocket.StatusTryAgainLater, fmt.Sprintf("the agent of machine %s did not answer within %s", machine, s.cfg.LogAttachTimeout))
		return
	}
	defer agent.CloseNow()
	relay.Pipe(r.Context(), caller, agent)
}

// handleMachineStream is an agent's answer to a stream request: GET
// /v1/machines/{id}/streams/{stream} (a WebSocket).
func (s *Server) handleMachineStream(w http.ResponseWriter, r *http.Request) {
	pending, ok := s.streams.Claim(r.PathValue("stream"), r.PathValue("id"))
	if !ok {
		s.writeError(w, r, errorf(http.StatusGone, "gone", "", "no one waits for stream %s", r.PathValue("stream")))
		return
	}
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	conn.SetReadLimit(-1)
	pending.Answer(conn)
}

// recordAudit writes an audit event of a call that does what a GET
// alone would not say (an exec, a port-forward).
func (s *Server) recordAudit(ctx context.Context, who principal, what string) {
	now := s.clock.Now()
	err := s.store.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
		return store.Record(tx, now, api.EventNormal, "Stream", auditKind, who.String(), "%s %s", who, what)
	})
	if err != nil {
		s.log.Warn("audit event", "call", what, "err", err)
	}
}
