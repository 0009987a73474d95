package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/internal/randid"
	"github.com/gantry-dev/gantry/provider/external"
	"github.com/gantry-dev/gantry/server/heartbeat"
	"github.com/gantry-dev/gantry/server/respond"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// handleJoin exchanges a join token for a machine credential.
func (s *Server) handleJoin(w http.ResponseWriter, r *http.Request) {
	if s.authBlocked(w, r) {
		return
	}
	var req api.JoinRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	_, stored := auth.TokenID(req.Token)
	var claims auth.JoinClaims
	if !stored {
		var err error
		if claims, err = s.verifySignedJoin(req); err != nil {
			if respond.HasStatus(err, http.StatusUnauthorized) {
				s.authFailed(r)
			}
			s.writeError(w, r, err)
			return
		}
	}
	var resp api.JoinResponse
	var firstJoin *api.Machine
	var monitoringErr error
	err := s.store.Update(r.Context(), func(tx store.Tx) error {
		resp, firstJoin, monitoringErr = api.JoinResponse{}, nil, nil
		claims := claims
		if stored {
			var err error
			if claims, err = s.useJoinToken(tx, req, s.clock.Now()); err != nil {
				return err
			}
		}
		m, created, err := s.machineForJoin(tx, claims, req)
		if err != nil {
			return err
		}
		now := s.clock.Now()
		if m.JoinedAt == nil && m.Provider != external.Name {
			firstJoin = m
		}
		inv, err := s.ingest.CheckInventory(tx, m, req.Inventory, now)
		if err != nil {
			return err
		}
		if err := fleet.Joined(m, inv, now); err != nil {
			return errorf(http.StatusConflict, "conflict", "", "%v", err)
		}
		put := tx.PutMachine
		if created {
			put = tx.CreateMachine
		}
		if err := put(m); err != nil {
			return err
		}
		credential, hash := auth.NewCredential(m.ID)
		if err := tx.PutCredentialHash(m.ID, hash); err != nil {
			return err
		}
		resp = api.JoinResponse{MachineID: m.ID, Credential: credential}
		if cl, err := tx.GetCluster(m.Cluster); err == nil {
			resp.Monitoring, monitoringErr = s.agentMonitoring(tx, cl.Spec.Monitoring)
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return store.Record(tx, now, api.EventNormal, "Joined", "Machine", m.ID, "agent joined: %s CPU, %s memory, runtimes %v",
			api.FormatCPU(m.Capacity.MilliCPU), api.FormatBytes(m.Capacity.MemoryBytes), m.Runtimes)
	})
	if err != nil {
		if respond.HasStatus(err, http.StatusUnauthorized) {
			s.authFailed(r)
		}
		s.writeError(w, r, err)
		return
	}
	if firstJoin != nil {
		s.metrics.Joined(s.clock.Since(firstJoin.CreatedAt).Seconds())
	}
	if monitoringErr != nil {
		// The credential is issued; the agent runs without export until
		// the secret is back, and the operator sees why.
		s.log.Warn("monitoring for a joining machine", "machine", resp.MachineID, "err", monitoringErr)
	}
	resp.HeartbeatInterval, resp.Servers = s.ctrl.HeartbeatInterval().String(), s.cfg.AgentServers
	s.ctrl.Trigger()
	writeJSON(w, http.StatusOK, resp)
}

// verifySignedJoin checks a join token the server signed (for a machine
// it launched, or minted by POST /v1/join-tokens).
func (s *Server) verifySignedJoin(req api.JoinRequest) (auth.JoinClaims, error) {
	claims, err := s.signer.Verify(req.Token, req.Cluster, s.clock.Now())
	switch {
	case errors.Is(err, auth.ErrWrongCluster):
		return claims, errorf(http.StatusForbidden, "forbidden", "cluster", "%v", err)
	case err != nil:
		return claims, errorf(http.StatusUnauthorized, "unauthorized", "token", "%v", err)
	case claims.MachineID != "" && req.MachineID != "" && claims.MachineID != req.MachineID:
		return claims, errorf(http.StatusForbidden, "forbidden", "machineId", "%v", auth.ErrWrongMachine)
	}
	return claims, nil
}

// agentMonitoring is a cluster's monitoring as its agents need it, with
// the header values read from Secrets or from this server's environment
// and files. An error names the header, never its value.
func (s *Server) agentMonitoring(tx store.Tx, m *api.Monitoring) (*api.AgentMonitoring, error) {
	if m == nil {
		return nil, nil
	}
	out := &api.AgentMonitoring{LogsEndpoint: m.OTLPLogsEndpoint, MetricsEndpoint: m.OTLPMetricsEndpoint}
	secrets := s.secretReader(tx)
	for i, h := range m.Headers {
		value, err := secrets.Header(h.SecretRef)
		if err != nil {
			return nil, fmt.Errorf("spec.monitoring.headers[%d] (%s): %w", i, h.Name, err)
		}
		if out.Headers == nil {
			out.Headers = map[string]string{}
		}
		out.Headers[h.Name] = value
	}
	return out, nil
}

// machineForJoin finds the machine a token was minted for, or registers a
// new one for a token minted by hand (`gantry join-token`): a machine of
// the external provider, which provisions nothing.
func (s *Server) machineForJoin(tx store.Tx, claims auth.JoinClaims, req api.JoinRequest) (*api.Machine, bool, error) {
	if claims.MachineID != "" {
		m, err := tx.GetMachine(claims.MachineID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, false, errorf(http.StatusGone, "gone", "", "machine %s no longer exists", claims.MachineID)
		}
		if err != nil {
			return nil, false, err
		}
		if !m.Live() || m.FleetState == api.FleetTerminating {
			return nil, false, errorf(http.StatusGone, "gone", "", "machine %s is %s", m.ID, m.FleetState)
		}
		if m.JoinedAt != nil {
			// A launched machine's token is for its first join only: it
			// stays on the machine's disk or in its user data, and must not
			// let its holder take the machine's credential.
			return nil, false, errorf(http.StatusUnauthorized, "unauthorized", "token", "machine %s has joined already: its join token is used up", m.ID)
		}
		return m, false, nil
	}
	id := req.MachineID
	if id != "" {
		if err := spec.ValidateMachineID(id); err != nil {
			return nil, false, errorf(http.StatusBadRequest, "invalid", "machineId", "%v", err)
		}
	}
	if id == "" {
		id = fmt.Sprintf("%s-%s-%s", claims.Cluster, claims.Group, claims.Nonce[:6])
	}
	if _, err := tx.GetMachine(id); err == nil {
		return nil, false, errorf(http.StatusConflict, "conflict", "machineId", "machine %s already exists", id)
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, false, err
	}
	now := s.clock.Now().UTC()
	return &api.Machine{ID: id, Cluster: claims.Cluster, Group: claims.Group, Provider: external.Name, ProviderKey: external.Name, LaunchKey: api.ManualLaunchKey,
		JoinState: api.JoinJoining, FleetState: api.FleetReady, CreatedAt: now, StateChangedAt: now}, true, nil
}

// handleHeartbeat records a machine's liveness and replica status, and
// answers with its assignments. A quiet heartbeat (nothing changed but
// the time) is answered from a read and kept in memory for the next
// batch; one that changes something is written at once.
func (s *Server) handleHeartbeat(w http.ResponseWriter, r *http.Request) {
	start := time.Now() // a duration: wall time even under a fake clock
	defer func() { s.metrics.HeartbeatTook(time.Since(start).Seconds()) }()
	var req api.HeartbeatRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	id, now := r.PathValue("id"), s.clock.Now()
	assignments, path, err := s.ingest.Heartbeat(r.Context(), id, req, now)
	if errors.Is(err, store.ErrUnavailable) {
		// It reached this server: it is alive, though its news could not
		// be written (it sends them again). Otherwise a store that fails
		// the writes of a loaded fleet would have its machines found lost.
		s.beats.Beat(id, now)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.beats.Beat(id, now)
	s.usage.record(id, req.Usage, now)
	s.metrics.Heartbeat(path)
	writeJSON(w, http.StatusOK, api.HeartbeatResponse{Assignments: api.NonNil(assignments), HeartbeatInterval: heartbeat.Interval(s.ctrl.HeartbeatInterval(), s.cfg.HeartbeatsPerLease, assignments).String(), Servers: s.cfg.AgentServers})
}

// handleAssignments lists a machine's assignments (read-only).
func (s *Server) handleAssignments(w http.ResponseWriter, r *http.Request) {
	var out []api.Assignment
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		m, err := tx.GetMachine(r.PathValue("id"))
		if err != nil {
			return err
		}
		replicas, err := tx.ListReplicas(store.ReplicaFilter{Machine: m.ID})
		if err != nil {
			return err
		}
		out, err = s.ingest.Assignments(tx, s.secretReader(tx), m, replicas)
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list[api.Assignment]{Items: api.NonNil(out)})
}

// handleCreateJoinToken mints a join token for a machine Gantry did not
// launch (bare metal, a machine made by hand). It is a stored join token,
// counted at each join: single-use unless the request says Reusable.
func (s *Server) handleCreateJoinToken(w http.ResponseWriter, r *http.Request) {
	var req api.JoinTokenRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	ttl := s.cfg.Controller.Calls.JoinTokenTTL
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil || d <= 0 || d > 7*24*time.Hour {
			s.writeError(w, r, errorf(http.StatusBadRequest, "invalid", "ttl", "ttl: want a duration between 1s and 168h, got %q", req.TTL))
			return
		}
		ttl = d
	}
	maxUses := 1
	switch {
	case req.Reusable > 1:
		maxUses = req.Reusable
	case req.Reusable == -1:
		maxUses = 0
	case req.Reusable < 0:
		s.writeError(w, r, errorf(http.StatusBadRequest, "invalid", "reusable", "reusable: want a number of machines, or -1 for no limit; got %d", req.Reusable))
		return
	}
	now := s.clock.Now().UTC()
	expires := now.Add(ttl)
	tok := &api.Token{ID: "tk-" + randid.Hex(8), Kind: api.TokenJoin, Description: "join-token", Cluster: req.Cluster, Group: req.Group,
		CreatedAt: now, ExpiresAt: &expires, MaxUses: maxUses}
	secret := auth.NewJoinToken(tok.ID, s.caPin())
	err := s.store.Update(r.Context(), func(tx store.Tx) error {
		if err := checkGroup(tx, req.Cluster, req.Group); err != nil {
			return err
		}
		return tx.PutToken(tok, auth.HashSecret(secret))
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.JoinTokenResponse{Token: secret, ExpiresAt: expires, CACertHash: s.caPin()})
}

// checkGroup: the cluster exists and has the capacity group.
func checkGroup(tx store.Tx, cluster, group string) error {
	c, err := tx.GetCluster(cluster)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusUnprocessableEntity, "invalid", "cluster", "cluster %q not found", cluster)
	}
	if err != nil {
		return err
	}
	if _, ok := c.Group(group); ok {
		return nil
	}
	return errorf(http.StatusUnprocessableEntity, "invalid", "group", "cluster %q has no capacity group %q", cluster, group)
}
