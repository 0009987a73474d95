package server

import (
	"errors"
	"net/http"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/internal/randid"
	"github.com/gantry-dev/gantry/store"
)

// API tokens (gantry token create|list|revoke): admin, read-only and join
// tokens, stored hashed, checked against the store on every use, so a
// revocation takes effect at once on every server sharing it.

// tokenPrincipal checks an API token for the API.
func (s *Server) tokenPrincipal(r *http.Request, id, secret string) (principal, error) {
	var tok *api.Token
	var hash []byte
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		var err error
		tok, hash, err = tx.GetToken(id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return principal{}, errorf(http.StatusUnauthorized, "unauthorized", "", "invalid token")
	}
	if err != nil {
		return principal{}, err
	}
	if err := usable(tok, hash, secret, s.clock.Now()); err != nil {
		return principal{}, err
	}
	switch tok.Kind {
	case api.TokenAdmin:
		return principal{admin: true, tokenID: id}, nil
	case api.TokenReadOnly:
		return principal{readOnly: true, tokenID: id}, nil
	}
	return principal{}, errorf(http.StatusForbidden, "forbidden", "", "a %s token cannot call the API", tok.Kind)
}

func usable(tok *api.Token, hash []byte, secret string, now time.Time) error {
	switch {
	case !auth.SecretMatches(secret, hash):
		return errorf(http.StatusUnauthorized, "unauthorized", "token", "invalid token")
	case tok.RevokedAt != nil:
		return errorf(http.StatusUnauthorized, "unauthorized", "token", "token %s was revoked", tok.ID)
	case tok.ExpiresAt != nil && !now.Before(*tok.ExpiresAt):
		return errorf(http.StatusUnauthorized, "unauthorized", "token", "token %s expired", tok.ID)
	}
	return nil
}

// useJoinToken checks a stored join token in the join's transaction and
// counts the use of a bounded one: a token used MaxUses times joins no
// more.
func (s *Server) useJoinToken(tx store.Tx, req api.JoinRequest, now time.Time) (auth.JoinClaims, error) {
	id, _ := auth.TokenID(req.Token)
	tok, hash, err := tx.GetToken(id)
	if errors.Is(err, store.ErrNotFound) {
		return auth.JoinClaims{}, errorf(http.StatusUnauthorized, "unauthorized", "token", "invalid token")
	}
	if err != nil {
		return auth.JoinClaims{}, err
	}
	if err := usable(tok, hash, req.Token, now); err != nil {
		return auth.JoinClaims{}, err
	}
	switch {
	case tok.Kind != api.TokenJoin:
		return auth.JoinClaims{}, errorf(http.StatusForbidden, "forbidden", "token", "a %s token cannot join machines", tok.Kind)
	case tok.Cluster != req.Cluster:
		return auth.JoinClaims{}, errorf(http.StatusForbidden, "forbidden", "cluster", "%v", auth.ErrWrongCluster)
	case tok.MaxUses > 0 && tok.Uses >= tok.MaxUses:
		return auth.JoinClaims{}, errorf(http.StatusUnauthorized, "unauthorized", "token", "token %s was used %d times, its limit", tok.ID, tok.Uses)
	}
	if tok.MaxUses > 0 {
		// Only a bounded token's uses are counted: an unbounded one joins a
		// fleet at once (thousands of machines over several servers), and
		// a count in its row would make every join write that one row.
		tok.Uses++
		if err := tx.PutToken(tok, nil); err != nil {
			return auth.JoinClaims{}, err
		}
	}
	return auth.JoinClaims{Cluster: tok.Cluster, Group: tok.Group, Nonce: randid.Hex(6)}, nil
}

func (s *Server) handleCreateToken(w http.ResponseWriter, r *http.Request) {
	var req api.TokenRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	now := s.clock.Now().UTC()
	tok, err := newTokenFrom(req, now)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	secret := auth.NewToken(tok.ID)
	if tok.Kind == api.TokenJoin {
		secret = auth.NewJoinToken(tok.ID, s.caPin())
	}
	err = s.store.Update(r.Context(), func(tx store.Tx) error {
		if tok.Kind == api.TokenJoin {
			if err := checkGroup(tx, tok.Cluster, tok.Group); err != nil {
				return err
			}
		}
		return tx.PutToken(tok, auth.HashSecret(secret))
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.TokenResponse{Token: *tok, Secret: secret, CACertHash: s.caPin()})
}

func newTokenFrom(req api.TokenRequest, now time.Time) (*api.Token, error) {
	tok := &api.Token{ID: "tk-" + randid.Hex(8), Kind: req.Kind, Description: req.Description, Cluster: req.Cluster, Group: req.Group, CreatedAt: now}
	ttl := time.Duration(0)
	switch req.Kind {
	case api.TokenAdmin, api.TokenReadOnly:
		if req.Cluster != "" || req.Group != "" || req.MaxUses != 0 {
			return nil, errorf(http.StatusBadRequest, "invalid", "kind", "cluster, group and maxUses are for join tokens only")
		}
	case api.TokenJoin:
		if req.Cluster == "" || req.Group == "" {
			return nil, errorf(http.StatusBadRequest, "invalid", "cluster", "a join token needs a cluster and a group")
		}
		tok.MaxUses, ttl = 1, 24*time.Hour
		switch {
		case req.MaxUses > 0:
			tok.MaxUses = req.MaxUses
		case req.MaxUses == -1:
			tok.MaxUses = 0
		case req.MaxUses != 0:
			return nil, errorf(http.StatusBadRequest, "invalid", "maxUses", "maxUses: want a positive number, or -1 for no limit")
		}
	default:
		return nil, errorf(http.StatusBadRequest, "invalid", "kind", "kind %q: want admin, read-only or join", req.Kind)
	}
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil || d <= 0 {
			return nil, errorf(http.StatusBadRequest, "invalid", "ttl", "ttl: want a positive duration, got %q", req.TTL)
		}
		ttl = d
	}
	if ttl > 0 {
		exp := now.Add(ttl)
		tok.ExpiresAt = &exp
	}
	return tok, nil
}

func (s *Server) handleListTokens(w http.ResponseWriter, r *http.Request) {
	var out []*api.Token
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		var err error
		out, err = tx.ListTokens()
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list[*api.Token]{Items: api.NonNil(out)})
}

func (s *Server) handleRevokeToken(w http.ResponseWriter, r *http.Request) {
	now := s.clock.Now().UTC()
	var tok *api.Token
	err := s.store.Update(r.Context(), func(tx store.Tx) error {
		var err error
		if tok, _, err = tx.GetToken(r.PathValue("id")); err != nil {
			return err
		}
		if tok.RevokedAt == nil {
			tok.RevokedAt = &now
		}
		return tx.PutToken(tok, nil)
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, tok)
}
