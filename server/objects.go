package server

import (
	"net/http"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/planner"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// Reads and deletions of clusters and services, with their status (apply
// and the single-object writes are in resources.go).

func (s *Server) handleListClusters(w http.ResponseWriter, r *http.Request) {
	if s.watching(w, r, store.FeedCluster, watchFilter{}, func(tx store.Tx) ([]any, error) { return listAny(tx.ListClusters()) }) {
		return
	}
	var out []api.Cluster
	var rev int64
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		clusters, err := tx.ListClusters()
		if err != nil {
			return err
		}
		if rev, err = tx.Revision(); err != nil {
			return err
		}
		machines, err := tx.ListMachines(store.MachineFilter{LiveOnly: true})
		if err != nil {
			return err
		}
		mem, err := memoryOf(tx)
		if err != nil {
			return err
		}
		for _, c := range clusters {
			c.Status = s.clusterStatus(c, machines, mem)
			out = append(out, *c)
		}
		return nil
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list[api.Cluster]{Metadata: &api.ListMeta{ResourceVersion: rev}, Items: api.NonNil(out)})
}

func (s *Server) handleGetCluster(w http.ResponseWriter, r *http.Request) {
	var c *api.Cluster
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		var err error
		if c, err = tx.GetCluster(r.PathValue("name")); err != nil {
			return err
		}
		machines, err := tx.ListMachines(store.MachineFilter{Cluster: c.Metadata.Name, LiveOnly: true})
		if err != nil {
			return err
		}
		mem, err := memoryOf(tx)
		c.Status = s.clusterStatus(c, machines, mem)
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// memoryOf reads the control loop's memory, where cluster status comes
// from (whichever server leads).
func memoryOf(tx store.Tx) (decide.Memory, error) {
	entries, err := tx.ListMemory()
	if err != nil {
		return decide.Memory{}, err
	}
	return decide.DecodeMemory(entries)
}

// clusterStatus is a cluster's groups (desired from the control loop's
// memory, machines from the store) and conditions: the loop's, and the
// server's own store health.
func (s *Server) clusterStatus(c *api.Cluster, machines []*api.Machine, mem decide.Memory) *api.ClusterStatus {
	st := &api.ClusterStatus{}
	for _, g := range c.Spec.CapacityGroups {
		gs := api.GroupStatus{GroupID: g.GroupID, TemplateHash: spec.TemplateHash(c, g.GroupID)}
		if d, ok := mem.Desired[planner.Key(c.Metadata.Name, g.GroupID)]; ok {
			gs.Desired = d
		} else {
			gs.Desired = g.MinSize
		}
		for _, m := range machines {
			if m.Cluster == c.Metadata.Name && m.Group == g.GroupID && m.Live() {
				gs.Current++
				if m.JoinState == api.JoinJoined {
					gs.Joined++
				}
				if m.TemplateHash == gs.TemplateHash {
					gs.Updated++
				}
			}
		}
		st.Groups = append(st.Groups, gs)
	}
	for _, typ := range []string{api.ConditionProviderReady, api.ConditionKubernetesReady} {
		if cond, ok := mem.Conditions[decide.ConditionKey(c.Metadata.Name, typ)]; ok {
			st.Conditions = append(st.Conditions, cond)
		}
	}
	st.Conditions = append(st.Conditions, s.storeCondition())
	return st
}

// storeCondition says whether the server's store accepts writes.
func (s *Server) storeCondition() api.Condition {
	h := s.store.Health()
	if h.Healthy {
		return api.Condition{Type: api.ConditionStoreWritable, Status: "True", LastTransitionTime: h.Since.UTC()}
	}
	return api.Condition{Type: api.ConditionStoreWritable, Status: "False", Reason: "StoreFailing", Message: h.Error, LastTransitionTime: h.Since.UTC()}
}

func (s *Server) handleDeleteCluster(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := s.store.Update(r.Context(), func(tx store.Tx) error {
		if _, err := tx.GetCluster(name); err != nil {
			return err
		}
		services, err := tx.ListServices()
		if err != nil {
			return err
		}
		for _, svc := range services {
			if svc.Spec.Cluster == name {
				return errorf(http.StatusConflict, "conflict", "", "cluster %q still runs service %q: delete its services first", name, svc.Metadata.Name)
			}
		}
		if err := tx.DeleteCluster(name); err != nil {
			return err
		}
		return store.Record(tx, s.clock.Now(), api.EventNormal, "Deleted", api.KindCluster, name, "cluster deleted; its machines will be terminated")
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.ctrl.Trigger()
	writeJSON(w, http.StatusOK, map[string]string{"deleted": "cluster/" + name})
}

func (s *Server) handleListServices(w http.ResponseWriter, r *http.Request) {
	if s.watching(w, r, store.FeedService, watchFilter{}, func(tx store.Tx) ([]any, error) { return listAny(tx.ListServices()) }) {
		return
	}
	var out []api.Service
	var rev int64
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		services, err := tx.ListServices()
		if err != nil {
			return err
		}
		if rev, err = tx.Revision(); err != nil {
			return err
		}
		replicas, err := tx.ListReplicas(store.ReplicaFilter{})
		if err != nil {
			return err
		}
		deployments, err := deploymentsOf(tx, "")
		if err != nil {
			return err
		}
		for _, svc := range services {
			svc.Status = serviceStatus(svc, replicas, deployments)
			out = append(out, *svc)
		}
		return nil
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list[api.Service]{Metadata: &api.ListMeta{ResourceVersion: rev}, Items: api.NonNil(out)})
}

func (s *Server) handleGetService(w http.ResponseWriter, r *http.Request) {
	var svc *api.Service
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		var err error
		if svc, err = tx.GetService(r.PathValue("name")); err != nil {
			return err
		}
		replicas, err := tx.ListReplicas(store.ReplicaFilter{Service: svc.Metadata.Name})
		if err != nil {
			return err
		}
		deployments, err := deploymentsOf(tx, svc.Metadata.Name)
		svc.Status = serviceStatus(svc, replicas, deployments)
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, svc)
}

// deploymentsOf reads the deployments of one service, or of all ("").
func deploymentsOf(tx store.Tx, service string) (map[string]api.Deployment, error) {
	entries, err := tx.ListMemoryPrefix(decide.DeploymentKey(service))
	if err != nil {
		return nil, err
	}
	mem, err := decide.DecodeMemory(entries)
	return mem.Deployments, err
}

func serviceStatus(svc *api.Service, replicas []*api.Replica, deployments map[string]api.Deployment) *api.ServiceStatus {
	st := &api.ServiceStatus{Desired: svc.Spec.DesiredReplicas()}
	if d, ok := deployments[svc.Metadata.Name]; ok {
		st.Revision, st.Deployment, st.Updated, st.Available = d.Number, d.State, d.Updated, d.Available
	}
	for _, r := range replicas {
		if r.Service != svc.Metadata.Name || r.RetiringSince != nil { // a retiring replica is on its way out
			continue
		}
		switch r.State {
		case api.ReplicaRunning:
			st.Running++
		case api.ReplicaPending:
			st.Pending++
		}
	}
	return st
}

func (s *Server) handleDeleteService(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := s.store.Update(r.Context(), func(tx store.Tx) error {
		if _, err := tx.GetService(name); err != nil {
			return err
		}
		if err := refuseMemberChange(tx, name); err != nil {
			return err
		}
		return deleteServiceAndReplicas(tx, name, s.clock.Now())
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.ctrl.Trigger()
	writeJSON(w, http.StatusOK, map[string]string{"deleted": "service/" + name})
}

// deleteServiceAndReplicas deletes a service; its agents stop its
// replicas.
func deleteServiceAndReplicas(tx store.Tx, name string, now time.Time) error {
	if _, err := tx.GetService(name); err != nil {
		return err
	}
	if err := tx.DeleteService(name); err != nil {
		return err
	}
	replicas, err := tx.ListReplicas(store.ReplicaFilter{Service: name})
	if err != nil {
		return err
	}
	for _, rep := range replicas {
		if err := tx.DeleteReplica(rep.ID); err != nil {
			return err
		}
	}
	return store.Record(tx, now, api.EventNormal, "Deleted", api.KindService, name, "service deleted; %d replica(s) stopping", len(replicas))
}
