package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/failover"
	"github.com/gantry-dev/gantry/server/secretread"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// admitFailoverGroup admits a group and the two services it expands
// into, each checked against its cluster like any service; errors name
// the group's fields.
func (s *Server) admitFailoverGroup(tx store.Tx, g *api.FailoverGroup, inRequest map[string]*api.Cluster, secrets *secretread.Reader, secretValues map[string]map[string]string) ([]admitted, error) {
	a := admitted{item: api.ApplyItem{Kind: api.KindFailoverGroup, Name: g.Metadata.Name}, group: g}
	old, err := tx.GetFailoverGroup(g.Metadata.Name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if old != nil {
		if old.Spec.Primary != g.Spec.Primary || old.Spec.Replica != g.Spec.Replica || old.Spec.Capability.Name != g.Spec.Capability.Name {
			return nil, spec.ErrorList{{Path: "spec", Message: "primary, replica and capability.name are immutable: delete the group and create it again"}}
		}
		a.old = &old.Metadata
	}
	a.item.Action, a.item.Changes = change(old, g, func(g *api.FailoverGroup) (api.ObjectMeta, any) { return g.Metadata, g.Spec })
	out := []admitted{a}
	for i, m := range spec.FailoverMembers(g) {
		side := []string{"spec.primary", "spec.replica"}[i]
		existing, err := tx.GetService(m.Metadata.Name)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if existing != nil && (existing.Spec.Failover == nil || existing.Spec.Failover.Group != g.Metadata.Name) {
			return nil, spec.ErrorList{{Path: "metadata.name", Message: "the group's service " + quote(m.Metadata.Name) + " exists already and is not the group's"}}
		}
		cl, err := clusterOf(tx, m.Spec.Cluster, inRequest)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if err == nil && cl.Kubernetes() {
			return nil, spec.ErrorList{{Path: side + ".cluster", Message: "cluster " + quote(cl.Metadata.Name) + " is a Kubernetes cluster: failover groups run on machine clusters for now"}}
		}
		if err := checkSecretEnv(secrets, secretValues, m); err != nil {
			return nil, asTemplateErrors(err, side)
		}
		ma, err := admitService(tx, m, inRequest, s.registry)
		if err != nil {
			return nil, asTemplateErrors(err, side)
		}
		out = append(out, ma)
	}
	return out, nil
}

func clusterOf(tx store.Tx, name string, inRequest map[string]*api.Cluster) (*api.Cluster, error) {
	if cl, ok := inRequest[name]; ok {
		return cl, nil
	}
	return tx.GetCluster(name)
}

// asTemplateErrors names a member service's errors by the group's fields.
func asTemplateErrors(err error, side string) error {
	var list spec.ErrorList
	if !errors.As(err, &list) {
		return err
	}
	out := make(spec.ErrorList, 0, len(list))
	for _, e := range list {
		path := "spec.template" + strings.TrimPrefix(e.Path, "spec")
		if e.Path == "spec.cluster" {
			path = side + ".cluster"
		}
		out = append(out, &spec.FieldError{Path: path, Message: e.Message})
	}
	return out
}

// refuseMemberChange keeps a group's services the group's: they change
// through the group.
func refuseMemberChange(tx store.Tx, name string) error {
	svc, err := tx.GetService(name)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if svc.Spec.Failover != nil {
		return errorf(http.StatusConflict, "conflict", "metadata.name", "service %q belongs to failover group %q: change or delete the group", name, svc.Spec.Failover.Group)
	}
	return nil
}

func (s *Server) handleListFailoverGroups(w http.ResponseWriter, r *http.Request) {
	if s.watching(w, r, store.FeedFailoverGroup, watchFilter{}, func(tx store.Tx) ([]any, error) { return listAny(tx.ListFailoverGroups()) }) {
		return
	}
	var out []api.FailoverGroup
	var rev int64
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		groups, err := tx.ListFailoverGroups()
		if err != nil {
			return err
		}
		if rev, err = tx.Revision(); err != nil {
			return err
		}
		for _, g := range groups {
			if g.Status, err = failoverInfo(tx, g); err != nil {
				return err
			}
			out = append(out, *g)
		}
		return nil
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list[api.FailoverGroup]{Metadata: &api.ListMeta{ResourceVersion: rev}, Items: api.NonNil(out)})
}

func (s *Server) handleGetFailoverGroup(w http.ResponseWriter, r *http.Request) {
	var g *api.FailoverGroup
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		var err error
		if g, err = tx.GetFailoverGroup(r.PathValue("name")); err != nil {
			return err
		}
		g.Status, err = failoverInfo(tx, g)
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, g)
}

// failoverState reads a group's state from the leader's memory ("" phase:
// not decided yet).
func failoverState(tx store.Tx, group string) (failover.State, error) {
	entries, err := tx.ListMemoryPrefix(decide.FailoverKey(group))
	if err != nil {
		return failover.State{}, err
	}
	mem, err := decide.DecodeMemory(entries)
	return mem.Failover[group], err
}

// failoverInfo is a group's status: its phase and epoch, which side is
// primary and where it serves, and each member's role as told and as it
// reports.
func failoverInfo(tx store.Tx, g *api.FailoverGroup) (*api.FailoverGroupInfo, error) {
	st, err := failoverState(tx, g.Metadata.Name)
	if err != nil {
		return nil, err
	}
	info := &api.FailoverGroupInfo{Phase: st.Phase, Epoch: st.Epoch, Message: st.Message, LastFailover: st.LastFailover}
	if info.Phase == "" {
		info.Phase = "Pending"
	}
	for _, side := range []struct{ home, cluster string }{{failover.HomePrimary, g.Spec.Primary.Cluster}, {failover.HomeReplica, g.Spec.Replica.Cluster}} {
		name := spec.FailoverMemberName(g.Metadata.Name, side.cluster)
		m := api.FailoverMember{Cluster: side.cluster, Service: name, Home: side.home}
		replicas, err := tx.ListReplicas(store.ReplicaFilter{Service: name})
		if err != nil {
			return nil, err
		}
		r := decide.SideReplica(replicas)
		m.Role, _ = failover.Role(st, side.home, decide.Instance(r))
		if r != nil {
			m.Replica, m.Machine, m.State, m.Health = r.ID, r.Machine, string(r.State), r.Health
			m.Endpoint = decide.Endpoint(r, firstPort(g))
			if r.Member != nil {
				m.Serving, m.Epoch, m.Replication, m.Message = r.Member.Serving, r.Member.Epoch, r.Member.Replication, r.Member.Message
			}
			if st.SyncStandby != "" && st.SyncStandby == decide.Instance(r) {
				info.SyncStandby = side.cluster
			}
		}
		if side.home == st.Primary && st.Phase != "" {
			info.Primary = side.cluster
			if m.Role == api.RolePrimary && m.Serving && m.Epoch == st.Epoch && (st.Phase == failover.PhaseHealthy || st.Phase == failover.PhaseDegraded) {
				info.Endpoint = m.Endpoint
			}
		}
		info.Members = append(info.Members, m)
	}
	return info, nil
}

func firstPort(g *api.FailoverGroup) string {
	if len(g.Spec.Template.Ports) == 0 {
		return ""
	}
	return g.Spec.Template.Ports[0].Name
}

func (s *Server) handleDeleteFailoverGroup(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := s.store.Update(r.Context(), func(tx store.Tx) error {
		g, err := tx.GetFailoverGroup(name)
		if err != nil {
			return err
		}
		if err := tx.DeleteFailoverGroup(name); err != nil {
			return err
		}
		for _, m := range spec.FailoverMembers(g) {
			if err := deleteServiceAndReplicas(tx, m.Metadata.Name, s.clock.Now()); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		return store.Record(tx, s.clock.Now(), api.EventNormal, "Deleted", api.KindFailoverGroup, name, "failover group deleted; both sides stopping")
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.ctrl.Trigger()
	writeJSON(w, http.StatusOK, map[string]string{"deleted": "failovergroup/" + name})
}

// handleFailoverRequest takes `gantry failover promote|revert`: the
// leader's next pass starts it (the group's state machine refuses what
// the group cannot do now, with an event).
func (s *Server) handleFailoverRequest(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		action := action
		switch accept := r.URL.Query().Get("acceptDataLoss"); {
		case accept == "true" && action == api.FailoverPromote:
			action = api.FailoverPromoteAcceptDataLoss
		case accept != "" && accept != "false":
			s.writeError(w, r, errorf(http.StatusBadRequest, "invalid", "acceptDataLoss", "acceptDataLoss: want true or false on promote, got %q", accept))
			return
		}
		err := s.store.Update(r.Context(), func(tx store.Tx) error {
			g, err := tx.GetFailoverGroup(name)
			if err != nil {
				return err
			}
			st, err := failoverState(tx, name)
			if err != nil {
				return err
			}
			if err := requestAllowed(st, action); err != nil {
				return err
			}
			if rule := decide.DataRule(g.Spec.Capability); rule.Enforced && rule.Synchronous && st.SyncStandby == "" && action != api.FailoverPromoteAcceptDataLoss {
				return errorf(http.StatusConflict, "conflict", "", "the replica side is not the primary's synchronous standby (as of the primary's last report): promoting it could lose acknowledged writes; wait until `gantry failover status` names it, or promote with --accept-data-loss")
			}
			value, _ := json.Marshal(action)
			if err := tx.PutMemory(decide.FailoverRequestKey(name), string(value)); err != nil {
				return err
			}
			return store.Record(tx, s.clock.Now(), api.EventNormal, "Requested", api.KindFailoverGroup, name, "%s requested", action)
		})
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.ctrl.Trigger()
		writeJSON(w, http.StatusAccepted, map[string]string{"requested": action, "failovergroup": name})
	}
}

// requestAllowed refuses at once what the group cannot start now.
func requestAllowed(st failover.State, action string) error {
	switch {
	case st.Phase == "" || st.Phase == failover.PhaseInitializing:
		return errorf(http.StatusConflict, "conflict", "", "the group is still initialising")
	case st.Phase == failover.PhaseFencing || st.Phase == failover.PhaseSwitchover || st.Phase == failover.PhasePromoting:
		return errorf(http.StatusConflict, "conflict", "", "a failover is under way (%s)", st.Phase)
	case action == api.FailoverRevert && st.Primary == failover.HomePrimary:
		return errorf(http.StatusConflict, "conflict", "", "nothing to revert: the spec's primary side is primary")
	case st.Phase == failover.PhaseDegraded:
		return errorf(http.StatusConflict, "conflict", "", "the replica side is not ready yet (phase Degraded): wait for Healthy")
	}
	return nil
}

// memberRole is what a failover member must do, for its assignment: its
// role at the group's epoch, where the primary serves, and the group's
// lease and capability.
func memberRole(tx store.Tx, r *api.Replica, member *api.FailoverMemberSpec) (*api.FailoverAssignment, error) {
	g, err := tx.GetFailoverGroup(member.Group)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st, err := failoverState(tx, member.Group)
	if err != nil {
		return nil, err
	}
	as := &api.FailoverAssignment{Group: member.Group, Role: api.RoleFenced, Epoch: st.Epoch, LeaseSeconds: g.Spec.LeaseSeconds, Capability: g.Spec.Capability}
	if st.Phase == "" {
		return as, nil // the leader has not seen the group yet
	}
	as.Role, as.Bootstrap = failover.Role(st, member.Home, decide.Instance(r))
	if as.Role == api.RolePrimary {
		as.SyncStandby = st.SyncStandbyName
	}
	if as.Role == api.RoleReplica && st.Holder != "" {
		holder, err := tx.GetReplica(decide.InstanceReplica(st.Holder))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if holder != nil && decide.Instance(holder) == st.Holder {
			as.Primary = decide.Endpoint(holder, firstPort(g))
		}
	}
	return as, nil
}
