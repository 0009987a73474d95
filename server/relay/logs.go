// Package relay pairs the callers of `gantry logs`, `exec` and
// `port-forward` with the agents that answer them. An agent is never
// reached directly: it long-polls its server for requests (Logs.Take),
// then posts a log's chunks or opens a WebSocket of its own back, which
// the server hands to the waiting caller.
package relay

import (
	"context"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// Logs holds the requests waiting for each machine's agent and the log
// sessions their chunks go to.
type Logs struct {
	mu       sync.Mutex
	pending  map[string][]api.LogRequest // by machine
	wake     map[string]chan struct{}    // by machine, closed when a request arrives
	sessions map[string]*Session
	// polled is closed (and replaced) when an agent's poll starts to wait.
	polled chan struct{}
}

// Session is one viewer's log request: the agent's chunks arrive on
// Chunks until the viewer leaves (Gone is closed).
type Session struct {
	machine string
	chunks  chan Chunk
	gone    chan struct{}
}

// Chunk is a piece of a log as the agent posted it.
type Chunk struct {
	Data []byte
	// EOF: the log ended (a finished replica, a tail without follow).
	EOF bool
	// Err is why the agent could not read the log (empty when it could).
	Err string
}

// sessionBuffer is how many chunks wait for a slow viewer before the
// agent's post blocks.
const sessionBuffer = 8

// NewLogs returns an empty hub.
func NewLogs() *Logs {
	return &Logs{pending: map[string][]api.LogRequest{}, wake: map[string]chan struct{}{}, sessions: map[string]*Session{},
		polled: make(chan struct{})}
}

// Open queues a viewer's request for the machine's agent and returns the
// session its chunks go to; Close ends it.
func (h *Logs) Open(machine string, req api.LogRequest) *Session {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &Session{machine: machine, chunks: make(chan Chunk, sessionBuffer), gone: make(chan struct{})}
	h.sessions[req.ID] = s
	h.queueLocked(machine, req)
	return s
}

// Queue hands a request to the machine's agent's next poll (a stream's:
// the agent answers it on a WebSocket of its own, not in chunks).
func (h *Logs) Queue(machine string, req api.LogRequest) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.queueLocked(machine, req)
}

func (h *Logs) queueLocked(machine string, req api.LogRequest) {
	h.pending[machine] = append(h.pending[machine], req)
	if ch, ok := h.wake[machine]; ok {
		close(ch)
		delete(h.wake, machine)
	}
}

// Close ends the session of request id and withdraws the request if the
// agent has not taken it yet.
func (h *Logs) Close(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.sessions[id]
	if !ok {
		return
	}
	close(s.gone)
	delete(h.sessions, id)
	reqs := h.pending[s.machine][:0]
	for _, r := range h.pending[s.machine] {
		if r.ID != id {
			reqs = append(reqs, r)
		}
	}
	h.pending[s.machine] = reqs
}

// Take returns the machine's pending requests, waiting up to wait for one.
func (h *Logs) Take(ctx context.Context, machine string, wait time.Duration) []api.LogRequest {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		h.mu.Lock()
		if reqs := h.pending[machine]; len(reqs) > 0 {
			delete(h.pending, machine)
			h.mu.Unlock()
			return reqs
		}
		ch, ok := h.wake[machine]
		if !ok {
			ch = make(chan struct{})
			h.wake[machine] = ch
			close(h.polled)
			h.polled = make(chan struct{})
		}
		h.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// Polling reports whether machine's agent waits in a poll here now, and
// a channel closed when the next poll (of any agent) starts to wait.
func (h *Logs) Polling(machine string) (bool, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.wake[machine]
	return ok, h.polled
}

// Session is the open session of request id, when it is machine's.
func (h *Logs) Session(id, machine string) (*Session, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.sessions[id]
	return s, ok && s.machine == machine
}

// Chunks are the agent's chunks for the viewer.
func (s *Session) Chunks() <-chan Chunk { return s.chunks }

// Post hands the agent's chunk to the viewer; false when the viewer left
// or ctx ended first.
func (s *Session) Post(ctx context.Context, c Chunk) bool {
	select {
	case <-s.gone: // first: a select of ready cases picks at random
		return false
	default:
	}
	select {
	case s.chunks <- c:
		return true
	case <-s.gone:
		return false
	case <-ctx.Done():
		return false
	}
}
