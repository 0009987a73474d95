package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/server/respond"
	"github.com/gantry-dev/gantry/store"
)

type role int

const (
	rolePublic role = iota
	roleAdmin
	// roleMachine may only touch /v1/machines/{id}/... of its own id.
	roleMachine
	// roleAdminOnly is admin even for a GET: what acts on a replica
	// through a read's method (exec, port-forward) is not a read-only
	// token's.
	roleAdminOnly
	// roleReader is a read-only token's too, whatever the method: what
	// computes from the stored state and changes nothing (a simulation).
	roleReader
)

type principal struct {
	admin     bool
	readOnly  bool
	tokenID   string
	machineID string
}

type principalKey struct{}

// authenticate resolves the bearer token: the admin token, or a machine
// credential checked against its stored hash.
func (s *Server) authenticate(r *http.Request) (principal, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return principal{}, errorf(http.StatusUnauthorized, "unauthorized", "", "missing bearer token")
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(s.adminToken)) == 1 {
		return principal{admin: true}, nil
	}
	if id, ok := auth.TokenID(token); ok {
		return s.tokenPrincipal(r, id, token)
	}
	machineID, ok := auth.CredentialMachine(token)
	if !ok {
		return principal{}, errorf(http.StatusUnauthorized, "unauthorized", "", "invalid token")
	}
	now := s.clock.Now()
	if s.credentials.valid(machineID, token, now) {
		return principal{machineID: machineID}, nil
	}
	var hash []byte
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		var err error
		hash, err = tx.GetCredentialHash(machineID)
		return err
	})
	if errors.Is(err, store.ErrNotFound) || (err == nil && !auth.SecretMatches(token, hash)) {
		return principal{}, errorf(http.StatusUnauthorized, "unauthorized", "", "invalid token")
	}
	if err != nil {
		return principal{}, err
	}
	s.credentials.remember(machineID, token, now)
	return principal{machineID: machineID}, nil
}

// guard wraps a handler with the role it needs.
func (s *Server) guard(need role, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if need == rolePublic {
			h(w, r)
			return
		}
		if s.authBlocked(w, r) {
			return
		}
		p, err := s.authenticate(r)
		if err != nil {
			if respond.HasStatus(err, http.StatusUnauthorized) {
				s.authFailed(r)
			}
			s.writeError(w, r, err)
			return
		}
		switch {
		case p.admin && (need == roleAdmin || need == roleAdminOnly || need == roleReader):
		case p.readOnly && need == roleReader:
		case p.readOnly && need == roleAdmin && r.Method == http.MethodGet:
		case p.readOnly:
			s.writeError(w, r, errorf(http.StatusForbidden, "forbidden", "", "a read-only token may only read"))
			return
		case need == roleMachine && p.machineID != "" && p.machineID == r.PathValue("id"):
		case need == roleMachine && p.admin && r.Method == http.MethodGet:
		case p.machineID != "":
			s.writeError(w, r, errorf(http.StatusForbidden, "forbidden", "", "a machine credential may only read its own assignments and report its own status"))
			return
		default:
			s.writeError(w, r, errorf(http.StatusForbidden, "forbidden", "", "not allowed with this token"))
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	}
}
