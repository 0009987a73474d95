package server

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// handleJoin exchanges a join token for a machine credential.
func (s *Server) handleJoin(w http.ResponseWriter, r *http.Request) {
	var req api.JoinRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	claims, err := s.signer.Verify(req.Token, req.Cluster, time.Now())
	switch {
	case errors.Is(err, auth.ErrWrongCluster):
		s.writeError(w, r, errorf(http.StatusForbidden, "forbidden", "cluster", "%v", err))
		return
	case err != nil:
		s.writeError(w, r, errorf(http.StatusUnauthorized, "unauthorized", "token", "%v", err))
		return
	case claims.MachineID != "" && req.MachineID != "" && claims.MachineID != req.MachineID:
		s.writeError(w, r, errorf(http.StatusForbidden, "forbidden", "machineId", "%v", auth.ErrWrongMachine))
		return
	}
	var resp api.JoinResponse
	err = s.store.Update(r.Context(), func(tx store.Tx) error {
		m, err := s.machineForJoin(tx, claims, req)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		firstJoin := m.JoinedAt == nil && m.Provider != "external"
		applyInventory(m, req.Inventory)
		if err := fleet.SetJoinState(m, api.JoinJoined, now); err != nil {
			return errorf(http.StatusConflict, "conflict", "", "%v", err)
		}
		m.JoinedAt, m.LastHeartbeat, m.Reason = &now, &now, ""
		if err := tx.PutMachine(m); err != nil {
			return err
		}
		credential, hash := auth.NewCredential(m.ID)
		if err := tx.PutCredentialHash(m.ID, hash); err != nil {
			return err
		}
		resp = api.JoinResponse{MachineID: m.ID, Credential: credential}
		if firstJoin {
			s.metrics.Joined(now.Sub(m.CreatedAt).Seconds())
		}
		return store.Record(tx, api.EventNormal, "Joined", "Machine", m.ID, "agent joined: %s CPU, %s memory, runtimes %v",
			api.FormatCPU(m.Capacity.MilliCPU), api.FormatBytes(m.Capacity.MemoryBytes), m.Runtimes)
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp.HeartbeatInterval = s.ctrl.CurrentHeartbeatInterval().String()
	s.ctrl.Trigger()
	writeJSON(w, http.StatusOK, resp)
}

// machineForJoin finds the machine a token was minted for, or registers a
// new one for a token minted by hand (`gantry join-token`).
func (s *Server) machineForJoin(tx store.Tx, claims auth.JoinClaims, req api.JoinRequest) (*api.Machine, error) {
	if claims.MachineID != "" {
		m, err := tx.GetMachine(claims.MachineID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, errorf(http.StatusGone, "gone", "", "machine %s no longer exists", claims.MachineID)
		}
		if err != nil {
			return nil, err
		}
		if !m.Live() || m.FleetState == api.FleetTerminating {
			return nil, errorf(http.StatusGone, "gone", "", "machine %s is %s", m.ID, m.FleetState)
		}
		return m, nil
	}
	id := req.MachineID
	if id == "" {
		id = fmt.Sprintf("%s-%s-%s", claims.Cluster, claims.Group, claims.Nonce[:6])
	}
	if _, err := tx.GetMachine(id); err == nil {
		return nil, errorf(http.StatusConflict, "conflict", "machineId", "machine %s already exists", id)
	}
	now := time.Now().UTC()
	return &api.Machine{ID: id, Cluster: claims.Cluster, Group: claims.Group, Provider: "external", LaunchKey: "manual", JoinState: api.JoinJoining,
		FleetState: api.FleetReady, CreatedAt: now}, nil
}

func applyInventory(m *api.Machine, inv api.Inventory) {
	m.Capacity = inv.Capacity
	m.Runtimes = append([]string(nil), inv.Runtimes...)
	sort.Strings(m.Runtimes)
	m.GPUs = inv.GPUs
	if inv.Zone != "" {
		m.Zone = inv.Zone
	}
	if len(inv.Addresses) > 0 {
		m.Addresses = inv.Addresses
	}
	if len(inv.Labels) > 0 {
		labels := map[string]string{}
		for k, v := range m.Labels {
			labels[k] = v
		}
		for k, v := range inv.Labels {
			labels[k] = v
		}
		m.Labels = labels
	}
}

// handleHeartbeat records a machine's liveness and replica status, and
// answers with its assignments.
func (s *Server) handleHeartbeat(w http.ResponseWriter, r *http.Request) {
	var req api.HeartbeatRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	var assignments []api.Assignment
	err := s.store.Update(r.Context(), func(tx store.Tx) error {
		m, err := tx.GetMachine(id)
		if err != nil {
			return err
		}
		if !m.Live() {
			return errorf(http.StatusGone, "gone", "", "machine %s is terminated", id)
		}
		now := time.Now().UTC()
		m.LastHeartbeat = &now
		if m.UnreachableSince != nil {
			m.UnreachableSince, m.Reason = nil, ""
			if err := store.Record(tx, api.EventNormal, "Reachable", "Machine", id, "heartbeats again; its replicas stay"); err != nil {
				return err
			}
		}
		if req.Inventory != nil {
			applyInventory(m, *req.Inventory)
		}
		replicas, err := tx.ListReplicas(store.ReplicaFilter{Machine: id})
		if err != nil {
			return err
		}
		if err := recordStatuses(tx, m, replicas, req.Replicas, now); err != nil {
			return err
		}
		leaving, err := tx.ListReplicas(store.ReplicaFilter{PreviousMachine: id})
		if err != nil {
			return err
		}
		updateActivity(m, len(replicas)+len(leaving), now)
		if err := tx.PutMachine(m); err != nil {
			return err
		}
		if m.FleetState == api.FleetTerminating {
			return nil // it runs nothing more: anything it still runs has moved
		}
		assignments, err = assignmentsOf(tx, m, append(replicas, leaving...))
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.HeartbeatResponse{Assignments: nonNil(assignments), HeartbeatInterval: s.ctrl.CurrentHeartbeatInterval().String()})
}

// updateActivity moves a machine between ready (empty) and active.
func updateActivity(m *api.Machine, replicas int, now time.Time) {
	want := m.FleetState
	switch {
	case m.FleetState == api.FleetReady && replicas > 0:
		want = api.FleetActive
	case m.FleetState == api.FleetActive && replicas == 0:
		want = api.FleetReady
	}
	_ = fleet.SetFleetState(m, want, now) // ready ⇄ active is always allowed
}

// recordStatuses applies what the agent says of replicas assigned to it;
// reports about replicas assigned elsewhere (or gone) are ignored.
func recordStatuses(tx store.Tx, m *api.Machine, assigned []*api.Replica, statuses []api.ReplicaStatus, now time.Time) error {
	byID := map[string]*api.Replica{}
	for _, r := range assigned {
		byID[r.ID] = r
	}
	for _, st := range statuses {
		r, ok := byID[st.ReplicaID]
		if !ok {
			continue
		}
		prevState := r.State
		changed := r.State != st.State || r.Health != st.Health || r.Restarts != st.Restarts || r.Reason != st.Message || !sameInts(r.HostPorts, st.HostPorts) ||
			(r.PreviousMachine != "" && st.State == api.ReplicaRunning)
		if !changed {
			continue
		}
		r.State, r.Health, r.Restarts, r.Reason, r.HostPorts, r.UpdatedAt = st.State, st.Health, st.Restarts, st.Message, st.HostPorts, now
		if len(m.Addresses) > 0 {
			r.Address = m.Addresses[0]
		}
		handedOver := r.PreviousMachine != "" && st.State == api.ReplicaRunning && st.Health != api.HealthUnhealthy
		if handedOver {
			if err := store.Record(tx, api.EventNormal, "Moved", "Replica", r.ID, "running on %s; the copy on %s stops", m.ID, r.PreviousMachine); err != nil {
				return err
			}
			r.PreviousMachine = ""
		}
		if err := tx.PutReplica(r); err != nil {
			return err
		}
		if prevState != st.State {
			typ := api.EventNormal
			if st.State == api.ReplicaCrashed || st.State == api.ReplicaFailed {
				typ = api.EventWarning
			}
			msg := fmt.Sprintf("%s on %s", st.State, m.ID)
			if st.Message != "" {
				msg += ": " + st.Message
			}
			if err := store.Record(tx, typ, "ReplicaState", "Replica", r.ID, "%s", msg); err != nil {
				return err
			}
		}
	}
	return nil
}

func sameInts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// assignmentsOf is what machine m must run: each replica with its spec, and
// the GPUs and runtime class its placement gave it there.
func assignmentsOf(tx store.Tx, m *api.Machine, replicas []*api.Replica) ([]api.Assignment, error) {
	var out []api.Assignment
	services := map[string]*api.Service{}
	for _, r := range replicas {
		svc, ok := services[r.Service]
		if !ok {
			var err error
			svc, err = tx.GetService(r.Service)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			services[r.Service] = svc
		}
		as := api.Assignment{ReplicaID: r.ID, Service: r.Service, SpecHash: spec.RuntimeHash(svc.Spec), Spec: svc.Spec, Requests: r.Requests}
		if r.Machine == m.ID {
			as.GPUs, as.RuntimeClass = devicesOf(m, r.GPUIndexes), r.RuntimeClass
		}
		out = append(out, as)
	}
	return out, nil
}

func devicesOf(m *api.Machine, indexes []int) []api.GPUDevice {
	var out []api.GPUDevice
	for _, i := range indexes {
		for _, g := range m.GPUs {
			if g.Index == i {
				out = append(out, g)
			}
		}
	}
	return out
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
		out, err = assignmentsOf(tx, m, replicas)
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list[api.Assignment]{Items: nonNil(out)})
}

// handleCreateJoinToken mints a join token for a machine Gantry did not
// launch (bare metal, a machine made by hand).
func (s *Server) handleCreateJoinToken(w http.ResponseWriter, r *http.Request) {
	var req api.JoinTokenRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	ttl := s.cfg.Fleet.JoinTokenTTL
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil || d <= 0 || d > 7*24*time.Hour {
			s.writeError(w, r, errorf(http.StatusBadRequest, "invalid", "ttl", "ttl: want a duration between 1s and 168h, got %q", req.TTL))
			return
		}
		ttl = d
	}
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		c, err := tx.GetCluster(req.Cluster)
		if errors.Is(err, store.ErrNotFound) {
			return errorf(http.StatusUnprocessableEntity, "invalid", "cluster", "cluster %q not found", req.Cluster)
		}
		if err != nil {
			return err
		}
		for _, g := range c.Spec.CapacityGroups {
			if g.GroupID == req.Group {
				return nil
			}
		}
		return errorf(http.StatusUnprocessableEntity, "invalid", "group", "cluster %q has no capacity group %q", req.Cluster, req.Group)
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	expires := time.Now().Add(ttl)
	token, err := s.signer.Mint(auth.JoinClaims{Cluster: req.Cluster, Group: req.Group, ExpiresAt: expires})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.JoinTokenResponse{Token: token, ExpiresAt: expires.UTC()})
}
