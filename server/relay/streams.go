package relay

import (
	"context"
	"errors"
	"sync"

	"github.com/coder/websocket"
)

// Streams pairs callers' exec and port-forward streams with the
// WebSockets their agents open back.
type Streams struct {
	mu      sync.Mutex
	waiting map[string]*Pending
}

// Pending is a caller's stream waiting for its agent's WebSocket.
type Pending struct {
	machine string
	agent   chan *websocket.Conn
}

// NewStreams returns an empty hub.
func NewStreams() *Streams { return &Streams{waiting: map[string]*Pending{}} }

// Open registers the caller's stream id on machine; Close withdraws it.
func (h *Streams) Open(id, machine string) *Pending {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := &Pending{machine: machine, agent: make(chan *websocket.Conn, 1)}
	h.waiting[id] = p
	return p
}

// Close withdraws the caller's stream id.
func (h *Streams) Close(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.waiting, id)
}

// Claim takes the caller's stream id of machine for the agent's answer
// (false when none waits: it left, or it is another machine's).
func (h *Streams) Claim(id, machine string) (*Pending, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.waiting[id]
	if !ok || p.machine != machine {
		return nil, false
	}
	delete(h.waiting, id)
	return p, true
}

// Agent is where the agent's WebSocket arrives.
func (p *Pending) Agent() <-chan *websocket.Conn { return p.agent }

// Answer hands the agent's WebSocket to the waiting caller, who relays
// it from then on (a hijacked connection outlives its handler).
func (p *Pending) Answer(conn *websocket.Conn) { p.agent <- conn }

// Pipe copies messages each way until one side ends, then closes the
// other with the same status and reason.
func Pipe(ctx context.Context, a, b *websocket.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2)
	pipe := func(from, to *websocket.Conn) {
		for {
			typ, data, err := from.Read(ctx)
			if err != nil {
				errs <- err
				return
			}
			if err := to.Write(ctx, typ, data); err != nil {
				errs <- err
				return
			}
		}
	}
	go pipe(a, b)
	go pipe(b, a)
	err := <-errs
	status, reason := websocket.StatusNormalClosure, ""
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		status, reason = ce.Code, ce.Reason
	}
	_ = a.Close(status, reason)
	_ = b.Close(status, reason)
}
