package server

import (
	"errors"
	"net/http"
	"os"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// handleApply creates or updates every resource of a YAML/JSON body in one
// transaction: all of them, or none.
func (s *Server) handleApply(w http.ResponseWriter, r *http.Request) {
	body, err := s.readBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	docs, err := spec.Parse("request body", body, s.Catalogs)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var result api.ApplyResult
	err = s.store.Update(r.Context(), func(tx store.Tx) error {
		var err error
		result.Results, err = s.applyDocuments(tx, docs)
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.ctrl.Trigger()
	writeJSON(w, http.StatusOK, result)
}

func (s *Server) applyDocuments(tx store.Tx, docs []spec.Document) ([]api.ApplyItem, error) {
	inRequest := map[string]*api.Cluster{}
	var items []api.ApplyItem
	for _, d := range docs {
		if d.Cluster == nil {
			continue
		}
		if _, _, err := s.providers.For(d.Cluster.Spec.Provider); err != nil {
			return nil, errorf(http.StatusUnprocessableEntity, "invalid", "spec.provider",
				"document %d: spec.provider: %v", d.Index, err)
		}
		if errs := spec.ResolveSecrets(d.Cluster, os.LookupEnv); errs != nil {
			return nil, locate(errs, d.Index)
		}
		item, err := s.applyCluster(tx, d.Cluster)
		if err != nil {
			return nil, locate(err, d.Index)
		}
		inRequest[d.Name()] = d.Cluster
		items = append(items, item)
	}
	for _, d := range docs {
		if d.Service == nil {
			continue
		}
		item, err := s.applyService(tx, d.Service, inRequest)
		if err != nil {
			return nil, locate(err, d.Index)
		}
		items = append(items, item)
	}
	return items, nil
}

func locate(err error, doc int) error {
	var list spec.ErrorList
	if errors.As(err, &list) {
		for _, e := range list {
			e.File, e.Document = "request body", doc
		}
		return errorf(http.StatusUnprocessableEntity, "invalid", list[0].Path, "%s", list.Error())
	}
	return err
}

func (s *Server) applyCluster(tx store.Tx, c *api.Cluster) (api.ApplyItem, error) {
	item := api.ApplyItem{Kind: api.KindCluster, Name: c.Metadata.Name}
	old, err := tx.GetCluster(c.Metadata.Name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return item, err
	}
	now := time.Now().UTC()
	if old != nil {
		if errs := spec.CheckClusterUpdate(old, c); errs != nil {
			return item, errs
		}
		item.Changes = spec.Changes(resourceFields(old.Metadata, old.Spec), resourceFields(c.Metadata, c.Spec))
		if len(item.Changes) == 0 {
			item.Action = api.ActionUnchanged
			return item, nil
		}
		item.Action = api.ActionConfigured
		c.Metadata.Generation, c.Metadata.CreatedAt = old.Metadata.Generation+1, old.Metadata.CreatedAt
	} else {
		item.Action = api.ActionCreated
		c.Metadata.Generation, c.Metadata.CreatedAt = 1, &now
	}
	c.Metadata.UpdatedAt, c.Status = &now, nil
	if err := tx.PutCluster(c); err != nil {
		return item, err
	}
	return item, store.Record(tx, api.EventNormal, "Applied", api.KindCluster, c.Metadata.Name, "cluster %s (generation %d)", item.Action, c.Metadata.Generation)
}

func (s *Server) applyService(tx store.Tx, svc *api.Service, inRequest map[string]*api.Cluster) (api.ApplyItem, error) {
	item := api.ApplyItem{Kind: api.KindService, Name: svc.Metadata.Name}
	cl, ok := inRequest[svc.Spec.Cluster]
	if !ok {
		var err error
		cl, err = tx.GetCluster(svc.Spec.Cluster)
		if errors.Is(err, store.ErrNotFound) {
			return item, spec.ErrorList{{Path: "spec.cluster", Message: "cluster " + quote(svc.Spec.Cluster) + " not found"}}
		}
		if err != nil {
			return item, err
		}
	}
	if errs := spec.ValidateServiceInCluster(svc, cl); errs != nil {
		return item, errs
	}
	old, err := tx.GetService(svc.Metadata.Name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return item, err
	}
	now := time.Now().UTC()
	if old != nil {
		if errs := spec.CheckServiceUpdate(old, svc); errs != nil {
			return item, errs
		}
		item.Changes = spec.Changes(resourceFields(old.Metadata, old.Spec), resourceFields(svc.Metadata, svc.Spec))
		if len(item.Changes) == 0 {
			item.Action = api.ActionUnchanged
			return item, nil
		}
		item.Action = api.ActionConfigured
		svc.Metadata.Generation, svc.Metadata.CreatedAt = old.Metadata.Generation+1, old.Metadata.CreatedAt
	} else {
		item.Action = api.ActionCreated
		svc.Metadata.Generation, svc.Metadata.CreatedAt = 1, &now
	}
	svc.Metadata.UpdatedAt, svc.Status = &now, nil
	if err := tx.PutService(svc); err != nil {
		return item, err
	}
	return item, store.Record(tx, api.EventNormal, "Applied", api.KindService, svc.Metadata.Name, "service %s (generation %d)", item.Action, svc.Metadata.Generation)
}

// resourceFields is what counts as a change: labels and spec, not the
// server-set metadata.
func resourceFields(meta api.ObjectMeta, spec any) map[string]any {
	return map[string]any{"metadata": map[string]any{"labels": meta.Labels}, "spec": spec}
}

func quote(s string) string { return `"` + s + `"` }

// handlePutCluster replaces one cluster (the name in the body must match).
func (s *Server) handlePutCluster(w http.ResponseWriter, r *http.Request) {
	s.putOne(w, r, api.KindCluster)
}

// handlePutService replaces one service.
func (s *Server) handlePutService(w http.ResponseWriter, r *http.Request) {
	s.putOne(w, r, api.KindService)
}

func (s *Server) putOne(w http.ResponseWriter, r *http.Request, kind string) {
	body, err := s.readBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	docs, err := spec.Parse("request body", body, s.Catalogs)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	name := r.PathValue("name")
	if len(docs) != 1 || docs[0].Kind() != kind {
		s.writeError(w, r, errorf(http.StatusBadRequest, "invalid", "kind", "PUT takes exactly one %s", kind))
		return
	}
	if docs[0].Name() != name {
		s.writeError(w, r, errorf(http.StatusUnprocessableEntity, "invalid", "metadata.name", "metadata.name: %s name is immutable (URL names %q, body %q)", kind, name, docs[0].Name()))
		return
	}
	var items []api.ApplyItem
	err = s.store.Update(r.Context(), func(tx store.Tx) error {
		var err error
		items, err = s.applyDocuments(tx, docs)
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.ctrl.Trigger()
	writeJSON(w, http.StatusOK, items[0])
}

func (s *Server) handleListClusters(w http.ResponseWriter, r *http.Request) {
	var out []api.Cluster
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		clusters, err := tx.ListClusters()
		if err != nil {
			return err
		}
		machines, err := tx.ListMachines(store.MachineFilter{LiveOnly: true})
		if err != nil {
			return err
		}
		for _, c := range clusters {
			c.Status = s.clusterStatus(c, machines)
			out = append(out, *c)
		}
		return nil
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list[api.Cluster]{Items: nonNil(out)})
}

func (s *Server) handleGetCluster(w http.ResponseWriter, r *http.Request) {
	var c *api.Cluster
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		var err error
		if c, err = tx.GetCluster(r.PathValue("name")); err != nil {
			return err
		}
		machines, err := tx.ListMachines(store.MachineFilter{Cluster: c.Metadata.Name, LiveOnly: true})
		c.Status = s.clusterStatus(c, machines)
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) clusterStatus(c *api.Cluster, machines []*api.Machine) *api.ClusterStatus {
	st := &api.ClusterStatus{}
	for _, g := range c.Spec.CapacityGroups {
		gs := api.GroupStatus{GroupID: g.GroupID, TemplateHash: spec.TemplateHash(c, g.GroupID)}
		if d, ok := s.ctrl.Desired(c.Metadata.Name, g.GroupID); ok {
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
	st.Conditions = s.ctrl.Conditions(c.Metadata.Name)
	return st
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
		return store.Record(tx, api.EventNormal, "Deleted", api.KindCluster, name, "cluster deleted; its machines will be terminated")
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.ctrl.Trigger()
	writeJSON(w, http.StatusOK, map[string]string{"deleted": "cluster/" + name})
}

func (s *Server) handleListServices(w http.ResponseWriter, r *http.Request) {
	var out []api.Service
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		services, err := tx.ListServices()
		if err != nil {
			return err
		}
		replicas, err := tx.ListReplicas(store.ReplicaFilter{})
		if err != nil {
			return err
		}
		for _, svc := range services {
			svc.Status = serviceStatus(svc, replicas)
			out = append(out, *svc)
		}
		return nil
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list[api.Service]{Items: nonNil(out)})
}

func (s *Server) handleGetService(w http.ResponseWriter, r *http.Request) {
	var svc *api.Service
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		var err error
		if svc, err = tx.GetService(r.PathValue("name")); err != nil {
			return err
		}
		replicas, err := tx.ListReplicas(store.ReplicaFilter{Service: svc.Metadata.Name})
		svc.Status = serviceStatus(svc, replicas)
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, svc)
}

func serviceStatus(svc *api.Service, replicas []*api.Replica) *api.ServiceStatus {
	st := &api.ServiceStatus{Desired: svc.Spec.DesiredReplicas()}
	for _, r := range replicas {
		if r.Service != svc.Metadata.Name {
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
		return store.Record(tx, api.EventNormal, "Deleted", api.KindService, name, "service deleted; %d replica(s) stopping", len(replicas))
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.ctrl.Trigger()
	writeJSON(w, http.StatusOK, map[string]string{"deleted": "service/" + name})
}

func nonNil[T any](items []T) []T {
	if items == nil {
		return []T{}
	}
	return items
}
