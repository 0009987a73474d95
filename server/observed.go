package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// reservedOf is each cluster's system reserve.
func reservedOf(tx store.Tx) (map[string]api.Resources, error) {
	clusters, err := tx.ListClusters()
	if err != nil {
		return nil, err
	}
	reserved := map[string]api.Resources{}
	for _, c := range clusters {
		reserved[c.Metadata.Name] = spec.Reserved(c.Spec.SystemReserved)
	}
	return reserved, nil
}

// withAllocation fills in each machine's allocatable and allocated, derived
// from its capacity, its cluster's reserve and the replicas on it. Those
// come from the server's view: reading every replica of the store for
// each page of machines read 500,000 of them for a page of 500. The store
// answers when the view cannot.
func (s *Server) withAllocation(ctx context.Context, machines []*api.Machine, reserved map[string]api.Resources) error {
	allocated, ok := s.allocatedFromView(ctx, machines)
	if !ok {
		err := s.store.View(ctx, func(tx store.Tx) error {
			var err error
			allocated, err = allocatedFromStore(tx)
			return err
		})
		if err != nil {
			return err
		}
	}
	for _, m := range machines {
		m.Allocatable = api.Allocatable(m.Capacity, reserved[m.Cluster])
		m.Allocated = allocated[m.ID]
	}
	return nil
}

func (s *Server) allocatedFromView(ctx context.Context, machines []*api.Machine) (map[string]api.Resources, bool) {
	if !s.follower.Current(ctx) {
		return nil, false
	}
	ids := make([]string, len(machines))
	for i, m := range machines {
		ids[i] = m.ID
	}
	return s.view.Allocated(ids)
}

func allocatedFromStore(tx store.Tx) (map[string]api.Resources, error) {
	replicas, err := tx.ListReplicas(store.ReplicaFilter{})
	if err != nil {
		return nil, err
	}
	allocated := map[string]api.Resources{}
	for _, r := range replicas {
		if r.Machine != "" {
			allocated[r.Machine] = allocated[r.Machine].Add(r.Requests)
		}
	}
	return allocated, nil
}

func (s *Server) handleListMachines(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filter := store.MachineFilter{Cluster: q.Get("cluster"), LiveOnly: q.Get("all") == ""}
	if s.watching(w, r, store.FeedMachine, watchFilter{Cluster: filter.Cluster}, func(tx store.Tx) ([]any, error) { return listAny(tx.ListMachines(filter)) }) {
		return
	}
	page, err := parseListPage(q)
	if err == nil && len(page.After) > 1 {
		err = errorf(http.StatusBadRequest, "invalid", "continue", "query parameter continue: not a token of a machine list")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	offset, counted, err := parseOffset(q, page.Limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	filter.Page = store.Page{Limit: page.Limit, After: page.After, Offset: offset}
	var out []*api.Machine
	var rev int64
	var total int
	var reserved map[string]api.Resources
	err = s.store.View(r.Context(), func(tx store.Tx) error {
		var err error
		if out, err = tx.ListMachines(filter); err != nil {
			return err
		}
		if counted {
			if total, err = tx.CountMachines(filter); err != nil {
				return err
			}
		}
		if rev, err = tx.Revision(); err != nil {
			return err
		}
		reserved, err = reservedOf(tx)
		return err
	})
	if err == nil {
		err = s.withAllocation(r.Context(), out, reserved)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.beats.Overlay(out)
	var last []string
	if len(out) > 0 {
		last = []string{out[len(out)-1].ID}
	}
	meta := page.meta(rev, len(out), last)
	if counted {
		meta.RemainingItemCount = remaining(total, offset, len(out))
	}
	writeJSON(w, http.StatusOK, list[*api.Machine]{Metadata: &meta, Items: api.NonNil(out)})
}

func (s *Server) handleGetMachine(w http.ResponseWriter, r *http.Request) {
	var m *api.Machine
	var reserved map[string]api.Resources
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		var err error
		if m, err = tx.GetMachine(r.PathValue("id")); err != nil {
			return err
		}
		reserved, err = reservedOf(tx)
		return err
	})
	if err == nil {
		err = s.withAllocation(r.Context(), []*api.Machine{m}, reserved)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	one := []*api.Machine{m}
	s.beats.Overlay(one) // a copy, when a heartbeat is kept in memory
	writeJSON(w, http.StatusOK, one[0])
}

// handleDrain drains a machine: its replicas move (new copy first), then
// it is terminated.
func (s *Server) handleDrain(w http.ResponseWriter, r *http.Request) {
	var req api.DrainRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	deadline := s.cfg.Controller.Decide.DrainDeadline
	if req.Deadline != "" {
		d, err := time.ParseDuration(req.Deadline)
		if err != nil || d <= 0 {
			s.writeError(w, r, errorf(http.StatusBadRequest, "invalid", "deadline", "deadline: want a positive duration such as 10m, got %q", req.Deadline))
			return
		}
		deadline = d
	}
	id := r.PathValue("id")
	var m *api.Machine
	err := s.store.Update(r.Context(), func(tx store.Tx) error {
		var err error
		if m, err = tx.GetMachine(id); err != nil {
			return err
		}
		now := s.clock.Now()
		changed, err := fleet.Drain(m, "drain requested", now.Add(deadline), now)
		if err != nil {
			return errorf(http.StatusConflict, "conflict", "", "%v", err)
		}
		if !changed {
			return nil
		}
		if err := tx.PutMachine(m); err != nil {
			return err
		}
		return store.Record(tx, now, api.EventNormal, "Draining", "Machine", m.ID, "drain requested (deadline %s)", m.DrainDeadline.Format(time.RFC3339))
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.ctrl.Trigger()
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) handleListReplicas(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filter := store.ReplicaFilter{Service: q.Get("service"), Machine: q.Get("machine"), Cluster: q.Get("cluster")}
	watch := watchFilter{Service: filter.Service, Cluster: filter.Cluster, Machine: filter.Machine}
	if s.watching(w, r, store.FeedReplica, watch, func(tx store.Tx) ([]any, error) { return listAny(tx.ListReplicas(filter)) }) {
		return
	}
	page, err := parseListPage(q)
	if err == nil && len(page.After) != 0 && len(page.After) != 2 {
		err = errorf(http.StatusBadRequest, "invalid", "continue", "query parameter continue: not a token of a replica list")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	offset, counted, err := parseOffset(q, page.Limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	filter.Page = store.Page{Limit: page.Limit, After: page.After, Offset: offset}
	var out []*api.Replica
	var rev int64
	var total int
	// Answered from the view, brought first to the store's latest commit:
	// one read of the feed since the view's revision, rather than the
	// replicas' rows and a count of them (500,000 at 50,000 machines).
	err = s.store.View(r.Context(), func(tx store.Tx) error {
		_, err := s.view.Follow(tx)
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var loaded bool
	if out, total, rev, loaded = s.view.ListReplicas(filter, counted); !loaded {
		s.writeError(w, r, errorf(http.StatusServiceUnavailable, "unavailable", "", "the server's view of the store is not loaded"))
		return
	}
	var last []string
	if len(out) > 0 {
		last = []string{out[len(out)-1].Service, out[len(out)-1].ID}
	}
	meta := page.meta(rev, len(out), last)
	if counted {
		meta.RemainingItemCount = remaining(total, offset, len(out))
	}
	writeJSON(w, http.StatusOK, list[*api.Replica]{Metadata: &meta, Items: api.NonNil(out)})
}

// remaining is how many of a list of total follow a page of n at offset.
func remaining(total, offset, n int) *int64 {
	left := int64(max(0, total-offset-n))
	return &left
}

// parseOffset reads the offset of a numbered page (which needs a limit);
// counted says the list's size is asked for with it.
func parseOffset(q url.Values, limit int) (offset int, counted bool, err error) {
	v := q.Get("offset")
	if v == "" {
		return 0, false, nil
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil || n < 0:
		return 0, false, errorf(http.StatusBadRequest, "invalid", "offset", "query parameter offset: want a non-negative integer, got %q", v)
	case limit <= 0:
		return 0, false, errorf(http.StatusBadRequest, "invalid", "offset", "query parameter offset: needs a limit")
	case q.Get("continue") != "":
		return 0, false, errorf(http.StatusBadRequest, "invalid", "offset", "query parameter offset: not with continue")
	}
	return n, true, nil
}

// handleDeleteReplica deletes one replica as kubectl deletes a Pod: it
// leaves its service's name, its index is made again (a new replica,
// placed afresh), and it stops once drained. A failover member is not
// deleted this way: promote or revert its group.
func (s *Server) handleDeleteReplica(w http.ResponseWriter, r *http.Request) {
	var rep *api.Replica
	err := s.store.Update(r.Context(), func(tx store.Tx) error {
		var err error
		if rep, err = tx.GetReplica(r.PathValue("id")); err != nil {
			return err
		}
		svc, err := tx.GetService(rep.Service)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if svc != nil && svc.Spec.Failover != nil {
			return errorf(http.StatusConflict, "conflict", "", "replica %s is a member of failover group %s: use gantry failover promote or revert", rep.ID, svc.Spec.Failover.Group)
		}
		if !replica.Retire(rep, "deleted by request", s.clock.Now()) {
			return nil
		}
		if err := tx.PutReplica(rep); err != nil {
			return err
		}
		return store.Record(tx, s.clock.Now(), api.EventNormal, "Deleting", "Replica", rep.ID, "deleted by request: out of service %s's name, stopping once drained; its index is made again", rep.Service)
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.ctrl.Trigger()
	writeJSON(w, http.StatusOK, rep)
}

func (s *Server) handleGetReplica(w http.ResponseWriter, r *http.Request) {
	var rep *api.Replica
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		var err error
		rep, err = tx.GetReplica(r.PathValue("id"))
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (s *Server) handleListEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.EventFilter{ObjectKind: q.Get("kind"), ObjectName: q.Get("name")}
	for param, into := range map[string]*int64{"after": &f.AfterID} {
		if v := q.Get(param); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				s.writeError(w, r, errorf(http.StatusBadRequest, "invalid", param, "query parameter %s: want a non-negative integer, got %q", param, v))
				return
			}
			*into = n
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			s.writeError(w, r, errorf(http.StatusBadRequest, "invalid", "limit", "query parameter limit: want 1 to 10000, got %q", v))
			return
		}
		f.Limit = n
	}
	var out []*api.Event
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		var err error
		out, err = tx.ListEvents(f)
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list[*api.Event]{Items: api.NonNil(out)})
}

// handleCordon marks a machine (un)schedulable: new replicas go
// elsewhere; those it runs stay.
func (s *Server) handleCordon(cordon bool) http.HandlerFunc {
	reason, msg := "Uncordoned", "takes new replicas again"
	if cordon {
		reason, msg = "Cordoned", "takes no new replicas; those it runs stay"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var m *api.Machine
		err := s.store.Update(r.Context(), func(tx store.Tx) error {
			var err error
			if m, err = tx.GetMachine(r.PathValue("id")); err != nil {
				return err
			}
			if !m.Live() {
				return errorf(http.StatusConflict, "conflict", "", "machine %s is terminated", m.ID)
			}
			if !fleet.Cordon(m, cordon) {
				return nil
			}
			if err := tx.PutMachine(m); err != nil {
				return err
			}
			return store.Record(tx, s.clock.Now(), api.EventNormal, reason, "Machine", m.ID, "%s", msg)
		})
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.ctrl.Trigger()
		writeJSON(w, http.StatusOK, m)
	}
}
