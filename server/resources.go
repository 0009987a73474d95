package server

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// handleApply creates or updates every resource of a YAML/JSON body in one
// transaction: all of them, or none. With ?dryRun=true it says what
// applying would change and writes nothing (`gantry diff`).
func (s *Server) handleApply(w http.ResponseWriter, r *http.Request) {
	docs, err := s.parseBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	dryRun := r.URL.Query().Get("dryRun") == "true"
	var result api.ApplyResult
	err = s.store.Update(r.Context(), func(tx store.Tx) error {
		if err := keepRolloutMarks(tx, docs); err != nil {
			return err
		}
		admitted, err := s.admit(tx, docs)
		if err != nil {
			return err
		}
		if dryRun {
			result.Results = nil
			for _, a := range admitted {
				result.Results = append(result.Results, a.item)
			}
			return errDryRun
		}
		result.Results, err = s.write(tx, admitted)
		return err
	})
	if err != nil && !errors.Is(err, errDryRun) {
		s.writeError(w, r, err)
		return
	}
	if !dryRun {
		s.ctrl.Trigger()
	}
	writeJSON(w, http.StatusOK, result)
}

// errDryRun rolls a dry run's transaction back.
var errDryRun = errors.New("dry run")

func (s *Server) parseBody(w http.ResponseWriter, r *http.Request) ([]spec.Document, error) {
	body, err := s.readBody(w, r)
	if err != nil {
		return nil, err
	}
	return spec.Parse("request body", body, s.registry)
}

// admitted is a resource that passed every check, with what applying it
// changes and the stored version's metadata (nil if new).
type admitted struct {
	item    api.ApplyItem
	cluster *api.Cluster
	service *api.Service
	secret  *api.Secret
	group   *api.FailoverGroup
	// values of a Secret, read from the server's environment or files.
	values map[string]string
	old    *api.ObjectMeta
}

// admit checks resources against the stored ones — a provider this server
// has, secrets it can read, no immutable field changed, services that
// fit their cluster — and says what applying them would change. Apply
// and the dry run (`gantry plan`) both ask it, so they refuse alike.
func (s *Server) admit(tx store.Tx, docs []spec.Document) ([]admitted, error) {
	if err := checkVersions(tx, docs); err != nil {
		return nil, err
	}
	inRequest := map[string]*api.Cluster{}
	secrets := s.secretReader(tx)
	out, secretValues, err := s.admitSecrets(secrets, docs)
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		if d.Cluster == nil {
			continue
		}
		if d.Cluster.Kubernetes() {
			// A target, not a provider: spec validation checked its settings.
		} else if _, err := s.registry.Key(d.Cluster.Spec.Provider); err != nil {
			return nil, errorf(http.StatusUnprocessableEntity, "invalid", "spec.provider",
				"document %d: spec.provider: %v", d.Index, err)
		}
		if errs := spec.ResolveSecrets(d.Cluster, os.LookupEnv); errs != nil {
			return nil, locate(errs, d.Index)
		}
		if err := stampHeaderSecrets(secrets, secretValues, d.Cluster); err != nil {
			return nil, locate(err, d.Index)
		}
		if err := s.placeContainerCIDR(tx, d.Cluster, inRequest); err != nil {
			return nil, locate(err, d.Index)
		}
		if err := s.defaultNetworkMode(tx, d.Cluster); err != nil {
			return nil, err
		}
		a, err := admitCluster(tx, d.Cluster)
		if err != nil {
			return nil, locate(err, d.Index)
		}
		inRequest[d.Name()] = d.Cluster
		out = append(out, a)
	}
	for _, d := range docs {
		if d.Service == nil {
			continue
		}
		if err := refuseMemberChange(tx, d.Service.Metadata.Name); err != nil {
			return nil, err
		}
		if err := checkSecretEnv(secrets, secretValues, d.Service); err != nil {
			return nil, locate(err, d.Index)
		}
		a, err := admitService(tx, d.Service, inRequest, s.registry)
		if err != nil {
			return nil, locate(err, d.Index)
		}
		out = append(out, a)
	}
	if err := checkExposedPorts(tx, docs); err != nil {
		return nil, err
	}
	if err := checkNameClash(tx, docs); err != nil {
		return nil, err
	}
	for _, d := range docs {
		if d.FailoverGroup == nil {
			continue
		}
		as, err := s.admitFailoverGroup(tx, d.FailoverGroup, inRequest, secrets, secretValues)
		if err != nil {
			return nil, locate(err, d.Index)
		}
		out = append(out, as...)
	}
	return out, nil
}

// placeContainerCIDR keeps a new cluster's containerCidr off those of
// the clusters on its network (the same provider key: the same host,
// account and region, …): the default one moves to the first /16 from
// it that none holds; one the spec names is refused when it overlaps.
// A cluster that exists keeps its own (it is immutable); a spec with the
// default (no containerCidr written) is taken to mean that one.
func (s *Server) placeContainerCIDR(tx store.Tx, c *api.Cluster, inRequest map[string]*api.Cluster) error {
	if c.Kubernetes() || c.Spec.ContainerCIDR == "" {
		return nil
	}
	existing, err := tx.GetCluster(c.Metadata.Name)
	switch {
	case err == nil:
		// A spec that names none (the default) keeps the one placed.
		if c.Spec.ContainerCIDR == spec.DefaultContainerCIDR && existing.Spec.ContainerCIDR != "" {
			c.Spec.ContainerCIDR = existing.Spec.ContainerCIDR
		}
		return nil
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	key, err := s.registry.Key(c.Spec.Provider)
	if err != nil {
		return err
	}
	stored, err := tx.ListClusters()
	if err != nil {
		return err
	}
	var taken []netip.Prefix
	owners := map[netip.Prefix]string{}
	for _, other := range append(stored, slices.Collect(maps.Values(inRequest))...) {
		if other.Metadata.Name == c.Metadata.Name || other.Kubernetes() {
			continue
		}
		if k, err := s.registry.Key(other.Spec.Provider); err != nil || k != key {
			continue
		}
		if p, err := netip.ParsePrefix(other.Spec.ContainerCIDR); err == nil {
			taken, owners[p] = append(taken, p), other.Metadata.Name
		}
	}
	want, err := netip.ParsePrefix(c.Spec.ContainerCIDR)
	if err != nil {
		return nil // validation names it
	}
	overlapping := func(p netip.Prefix) (netip.Prefix, bool) {
		for _, t := range taken {
			if t.Overlaps(p) {
				return t, true
			}
		}
		return netip.Prefix{}, false
	}
	other, clash := overlapping(want)
	if !clash {
		return nil
	}
	if c.Spec.ContainerCIDR != spec.DefaultContainerCIDR {
		return spec.ErrorList{{Path: "spec.containerCidr", Message: fmt.Sprintf("%s overlaps cluster %s's %s on the same network (provider %s): pick another", want, owners[other], other, key)}}
	}
	for next, ok := nextPrefix(want); ok; next, ok = nextPrefix(next) {
		if _, clash := overlapping(next); !clash {
			c.Spec.ContainerCIDR = next.String()
			return nil
		}
	}
	return spec.ErrorList{{Path: "spec.containerCidr", Message: "every /16 from " + want.String() + " is held by a cluster on this network: name one"}}
}

// nextPrefix is the prefix of the same size right after p (false past
// the end of the private 10.0.0.0/8).
func nextPrefix(p netip.Prefix) (netip.Prefix, bool) {
	a := p.Addr().As4()
	step := uint32(1) << (32 - p.Bits())
	n := (uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])) + step
	next := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), p.Bits())
	return next, next.Addr().As4()[0] == 10
}

// checkExposedPorts refuses a port two services (or failover groups) of
// a cluster expose: the stored ones as the request leaves them.
func checkExposedPorts(tx store.Tx, docs []spec.Document) error {
	type exposer struct {
		what, path string
		clusters   []string
		expose     []api.Expose
		doc        int // 0: stored, not in the request
	}
	all := map[string]exposer{}
	services, err := tx.ListServices()
	if err != nil {
		return err
	}
	for _, svc := range services {
		all["service "+svc.Metadata.Name] = exposer{"service " + svc.Metadata.Name, "spec", []string{svc.Spec.Cluster}, svc.Spec.Expose, 0}
	}
	groups, err := tx.ListFailoverGroups()
	if err != nil {
		return err
	}
	for _, g := range groups {
		all["group "+g.Metadata.Name] = exposer{"failover group " + g.Metadata.Name, "spec.template", []string{g.Spec.Primary.Cluster, g.Spec.Replica.Cluster}, g.Spec.Template.Expose, 0}
	}
	for _, d := range docs {
		switch {
		case d.Service != nil:
			all["service "+d.Name()] = exposer{"service " + d.Name(), "spec", []string{d.Service.Spec.Cluster}, d.Service.Spec.Expose, d.Index}
		case d.FailoverGroup != nil:
			g := d.FailoverGroup
			all["group "+d.Name()] = exposer{"failover group " + d.Name(), "spec.template", []string{g.Spec.Primary.Cluster, g.Spec.Replica.Cluster}, g.Spec.Template.Expose, d.Index}
		}
	}
	// Stored ones first, then the request's in order: the error names
	// the document that takes a port already taken.
	list := make([]exposer, 0, len(all))
	for _, e := range all {
		list = append(list, e)
	}
	sort.Slice(list, func(i, j int) bool {
		return list[i].doc < list[j].doc || list[i].doc == list[j].doc && list[i].what < list[j].what
	})
	type key struct {
		cluster string
		port    int
	}
	owner := map[key]string{}
	for _, e := range list {
		for i, ex := range e.expose {
			for _, cluster := range e.clusters {
				k := key{cluster, ex.Port}
				if other, taken := owner[k]; taken && other != e.what {
					return locate(spec.ErrorList{{Path: fmt.Sprintf("%s.expose[%d].port", e.path, i),
						Message: fmt.Sprintf("port %d of cluster %s is exposed by %s already", ex.Port, cluster, other)}}, e.doc)
				}
				owner[k] = e.what
			}
		}
	}
	return nil
}

// checkNameClash refuses a service and a failover group of one name in
// one cluster: both would answer <name>.<cluster>.gantry.
func checkNameClash(tx store.Tx, docs []spec.Document) error {
	inRequest := map[string]*api.FailoverGroup{}
	for _, d := range docs {
		if d.FailoverGroup != nil {
			inRequest[d.Name()] = d.FailoverGroup
		}
	}
	for _, d := range docs {
		switch {
		case d.Service != nil && d.Service.Spec.Failover == nil:
			g, err := inRequest[d.Name()], error(nil)
			if g == nil {
				g, err = tx.GetFailoverGroup(d.Name())
			}
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if c := d.Service.Spec.Cluster; c == g.Spec.Primary.Cluster || c == g.Spec.Replica.Cluster {
				return locate(spec.ErrorList{{Path: "metadata.name", Message: fmt.Sprintf("failover group %s has a side in cluster %s: both would be %s", g.Metadata.Name, c, api.ServiceName(g.Metadata.Name, c))}}, d.Index)
			}
		case d.FailoverGroup != nil:
			g := d.FailoverGroup
			svc, err := tx.GetService(d.Name())
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if c := svc.Spec.Cluster; svc.Spec.Failover == nil && (c == g.Spec.Primary.Cluster || c == g.Spec.Replica.Cluster) {
				return locate(spec.ErrorList{{Path: "metadata.name", Message: fmt.Sprintf("service %s runs in cluster %s: both would be %s", svc.Metadata.Name, c, api.ServiceName(svc.Metadata.Name, c))}}, d.Index)
			}
		}
	}
	return nil
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

// defaultNetworkMode gives a cluster whose spec names no network mode the
// one it has (an update never changes it behind the user's back: that
// would roll every machine), or, new, its provider's default: overlay on
// the clouds and exec, host elsewhere.
func (s *Server) defaultNetworkMode(tx store.Tx, c *api.Cluster) error {
	if c.Spec.Network != nil && c.Spec.Network.Mode != "" || c.Kubernetes() {
		return nil
	}
	old, err := tx.GetCluster(c.Metadata.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if mode := s.registry.NetworkMode(c.Spec.Provider.Name); mode != api.NetworkHost {
			c.Spec.Network = &api.NetworkSpec{Mode: mode}
		}
	case err != nil:
		return err
	default:
		c.Spec.Network = old.Spec.Network
	}
	return nil
}

func admitCluster(tx store.Tx, c *api.Cluster) (admitted, error) {
	a := admitted{item: api.ApplyItem{Kind: api.KindCluster, Name: c.Metadata.Name}, cluster: c}
	old, err := tx.GetCluster(c.Metadata.Name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return a, err
	}
	if old != nil {
		if errs := spec.CheckClusterUpdate(old, c); errs != nil {
			return a, errs
		}
		a.old = &old.Metadata
	}
	a.item.Action, a.item.Changes = change(old, c, func(c *api.Cluster) (api.ObjectMeta, any) { return c.Metadata, c.Spec })
	return a, nil
}

func admitService(tx store.Tx, svc *api.Service, inRequest map[string]*api.Cluster, providers spec.Providers) (admitted, error) {
	a := admitted{item: api.ApplyItem{Kind: api.KindService, Name: svc.Metadata.Name}, service: svc}
	cl, ok := inRequest[svc.Spec.Cluster]
	if !ok {
		var err error
		cl, err = tx.GetCluster(svc.Spec.Cluster)
		if errors.Is(err, store.ErrNotFound) {
			return a, spec.ErrorList{{Path: "spec.cluster", Message: "cluster " + quote(svc.Spec.Cluster) + " not found"}}
		}
		if err != nil {
			return a, err
		}
	}
	if errs := spec.ValidateServiceInCluster(svc, cl, providers); errs != nil {
		return a, errs
	}
	old, err := tx.GetService(svc.Metadata.Name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return a, err
	}
	if old != nil {
		if errs := spec.CheckServiceUpdate(old, svc); errs != nil {
			return a, errs
		}
		a.old = &old.Metadata
	}
	a.item.Action, a.item.Changes = change(old, svc, func(s *api.Service) (api.ObjectMeta, any) { return s.Metadata, s.Spec })
	return a, nil
}

// change says what applying updated over old (nil: new) does.
func change[T any](old, updated *T, fields func(*T) (api.ObjectMeta, any)) (string, []string) {
	if old == nil {
		return api.ActionCreated, nil
	}
	oldMeta, oldSpec := fields(old)
	newMeta, newSpec := fields(updated)
	changes := spec.Changes(resourceFields(oldMeta, oldSpec), resourceFields(newMeta, newSpec))
	if len(changes) == 0 {
		return api.ActionUnchanged, nil
	}
	return api.ActionConfigured, changes
}

// write stores admitted resources: a new generation for each change, with
// an event.
func (s *Server) write(tx store.Tx, resources []admitted) ([]api.ApplyItem, error) {
	now := s.clock.Now().UTC()
	var items []api.ApplyItem
	for _, a := range resources {
		items = append(items, a.item)
		if a.item.Action == api.ActionUnchanged {
			continue
		}
		if a.secret != nil {
			if _, err := s.putSecret(tx, a.secret.Metadata.Name, a.values, a.secret.Metadata.Labels); err != nil {
				return nil, err
			}
			continue
		}
		if a.cluster != nil {
			if err := stampPending(s.secretReader(tx), a.cluster); err != nil {
				return nil, err
			}
		}
		var meta *api.ObjectMeta
		var err error
		switch {
		case a.cluster != nil:
			meta = &a.cluster.Metadata
			stamp(meta, a.old, now)
			a.cluster.Status = nil
			err = tx.PutCluster(a.cluster)
		case a.group != nil:
			meta = &a.group.Metadata
			stamp(meta, a.old, now)
			a.group.Status = nil
			err = tx.PutFailoverGroup(a.group)
		default:
			meta = &a.service.Metadata
			stamp(meta, a.old, now)
			a.service.Status = nil
			err = tx.PutService(a.service)
		}
		if err != nil {
			return nil, err
		}
		if err := store.Record(tx, now, api.EventNormal, "Applied", a.item.Kind, a.item.Name, "%s %s (generation %d)",
			strings.ToLower(a.item.Kind), a.item.Action, meta.Generation); err != nil {
			return nil, err
		}
	}
	return items, nil
}

// stamp sets the server's part of a resource's metadata for a new
// generation.
func stamp(meta, old *api.ObjectMeta, now time.Time) {
	meta.Generation, meta.CreatedAt, meta.UpdatedAt = 1, &now, &now
	if old != nil {
		meta.Generation, meta.CreatedAt = old.Generation+1, old.CreatedAt
	}
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
	docs, err := s.parseBody(w, r)
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
		if err := keepRolloutMarks(tx, docs); err != nil {
			return err
		}
		admitted, err := s.admit(tx, docs)
		if err != nil {
			return err
		}
		items, err = s.write(tx, admitted)
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.ctrl.Trigger()
	writeJSON(w, http.StatusOK, items[0])
}

// keepRolloutMarks carries the rollout commands' marks over a spec file
// that does not name them: a pause (only `gantry rollout resume` undoes
// it, as kubectl apply leaves a paused Deployment paused) and a restart
// (an apply does not roll the service back to before it).
func keepRolloutMarks(tx store.Tx, docs []spec.Document) error {
	for _, d := range docs {
		if d.Service == nil {
			continue
		}
		old, err := tx.GetService(d.Service.Metadata.Name)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		sp := &d.Service.Spec
		sp.Update.Paused = sp.Update.Paused || old.Spec.Update.Paused
		if sp.RestartedAt == "" {
			sp.RestartedAt = old.Spec.RestartedAt
		}
	}
	return nil
}
