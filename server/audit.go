package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
)

// Audit: every mutating call of an operator, and every join, leaves an
// event of kind Audit naming who (the token's principal), what (method,
// path, answer) and when; GET /v1/events?kind=Audit reads them. Agents'
// own reports (heartbeats, log chunks) are not audited: they are the
// fleet's traffic, not changes anyone asked for. Bodies are never
// recorded (they may hold secrets).

const auditKind = "Audit"

func (p principal) String() string {
	switch {
	case p.tokenID != "":
		return "token/" + p.tokenID
	case p.admin:
		return "admin"
	case p.machineID != "":
		return "machine/" + p.machineID
	}
	return "anonymous"
}

// audited wraps a handler that changes state so that each call is
// recorded once it has been answered.
func (s *Server) audited(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h(rec, r)
		who, _ := r.Context().Value(principalKey{}).(principal)
		s.audit(who, r, rec.status)
	}
}

func (s *Server) audit(who principal, r *http.Request, status int) {
	now := s.clock.Now()
	msg := fmt.Sprintf("%s %s %s → %d", who, r.Method, r.URL.Path, status)
	err := s.store.Update(context.WithoutCancel(r.Context()), func(tx store.Tx) error {
		return store.Record(tx, now, api.EventNormal, r.Method, auditKind, who.String(), "%s", msg)
	})
	if err != nil {
		s.log.Warn("audit event", "call", msg, "err", err)
	}
}

// mutating: the routes an operator changes state through (a dry run
// changes nothing), and the join.
func mutating(rt route) bool {
	return rt.role != roleMachine && !strings.HasPrefix(rt.pattern, "GET ") && rt.pattern != "POST /v1/plan" && rt.pattern != "POST /v1/simulations"
}
