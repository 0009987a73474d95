package server

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/internal/randid"
	"github.com/gantry-dev/gantry/server/secretread"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// Secrets: values sealed with the encryption key (the context binds each
// to its Secret's name), never answered by any call. A Secret reads back
// as its keys and revision; the revision changes with the values, and
// with it the hash of every replica and machine template that uses it.

func (s *Server) secretReader(tx store.Tx) *secretread.Reader { return secretread.New(s.sealer, tx) }

// putSecret creates or replaces a Secret's values; unchanged values keep
// the revision. It returns the apply action.
func (s *Server) putSecret(tx store.Tx, name string, values map[string]string, labels map[string]string) (string, error) {
	old, err := s.secretReader(tx).Get(name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	action, revision := api.ActionCreated, randid.Hex(8)
	var oldMeta *api.ObjectMeta
	if old != nil {
		sameValues := maps.Equal(old.Values, values)
		switch {
		case sameValues && maps.Equal(old.Meta.Labels, labels):
			return api.ActionUnchanged, nil
		case sameValues:
			revision = old.Revision // labels alone changed
		default:
			if err := checkKeysStillUsed(tx, name, values); err != nil {
				return "", err
			}
		}
		action, oldMeta = api.ActionConfigured, &old.Meta
	}
	sealed, err := secretread.Seal(s.sealer, name, values)
	if err != nil {
		return "", err
	}
	now := s.clock.Now().UTC()
	sec := &api.Secret{APIVersion: api.APIVersion, Kind: api.KindSecret, Metadata: api.ObjectMeta{Name: name, Labels: labels},
		Status: &api.SecretInfo{Keys: slices.Sorted(maps.Keys(values)), Revision: revision}}
	stamp(&sec.Metadata, oldMeta, now)
	if err := tx.PutSecret(sec, sealed); err != nil {
		return "", err
	}
	if err := restampClusters(tx, name, revision); err != nil {
		return "", err
	}
	return action, store.Record(tx, now, api.EventNormal, "Applied", api.KindSecret, name, "secret %s (revision %s, keys %v)", action, revision, sec.Status.Keys)
}

// checkKeysStillUsed refuses new values that drop a key a service or a
// cluster still references.
func checkKeysStillUsed(tx store.Tx, name string, values map[string]string) error {
	users, err := secretUsers(tx, name, func(key string) bool { _, ok := values[key]; return !ok })
	if err != nil || len(users) == 0 {
		return err
	}
	return errorf(http.StatusConflict, "in-use", "data", "secret %s: %s still use keys it would no longer have", name, users)
}

// secretUsers are the services and clusters that use a key of the Secret
// for which match is true.
func secretUsers(tx store.Tx, name string, match func(key string) bool) ([]string, error) {
	var users []string
	services, err := tx.ListServices()
	if err != nil {
		return nil, err
	}
	for _, svc := range services {
		for _, ref := range svc.Spec.SecretEnv {
			if ref.Name == name && match(ref.Key) && !slices.Contains(users, "service/"+svc.Metadata.Name) {
				users = append(users, "service/"+svc.Metadata.Name)
			}
		}
	}
	clusters, err := tx.ListClusters()
	if err != nil {
		return nil, err
	}
	for _, c := range clusters {
		if c.Spec.Monitoring == nil {
			continue
		}
		for _, h := range c.Spec.Monitoring.Headers {
			if h.SecretRef.Name == name && match(h.SecretRef.Key) && !slices.Contains(users, "cluster/"+c.Metadata.Name) {
				users = append(users, "cluster/"+c.Metadata.Name)
			}
		}
	}
	return users, nil
}

// headerStamp stands for a Secret's value in a machine template: its
// revision (the value itself is never hashed into anything stored).
func headerStamp(revision string) string { return "secret-revision:" + revision }

// restampClusters gives the monitoring headers that use the Secret its
// new revision, so that the clusters' machines roll.
func restampClusters(tx store.Tx, name, revision string) error {
	clusters, err := tx.ListClusters()
	if err != nil {
		return err
	}
	for _, c := range clusters {
		if c.Spec.Monitoring == nil {
			continue
		}
		changed := false
		for i := range c.Spec.Monitoring.Headers {
			h := &c.Spec.Monitoring.Headers[i]
			if h.SecretRef.Name == name && h.ValueSHA256 != headerStamp(revision) {
				h.ValueSHA256, changed = headerStamp(revision), true
			}
		}
		if changed {
			if err := tx.PutCluster(c); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Server) handleCreateSecret(w http.ResponseWriter, r *http.Request) {
	s.writeSecret(w, r, "", false)
}

func (s *Server) handlePutSecret(w http.ResponseWriter, r *http.Request) {
	s.writeSecret(w, r, r.PathValue("name"), true)
}

func (s *Server) writeSecret(w http.ResponseWriter, r *http.Request, name string, replace bool) {
	var req api.SecretRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if name == "" {
		name = req.Name
	} else if req.Name != "" && req.Name != name {
		s.writeError(w, r, errorf(http.StatusBadRequest, "invalid", "name", "name %q differs from the path's %q", req.Name, name))
		return
	}
	if errs := spec.ValidateSecretData(name, req.Data); errs != nil {
		s.writeError(w, r, errs)
		return
	}
	var action string
	err := s.store.Update(r.Context(), func(tx store.Tx) error {
		var labels map[string]string // the API replaces values; labels come from specs
		stored, _, err := tx.GetSecret(name)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err == nil {
			if !replace {
				return errorf(http.StatusConflict, "exists", "name", "secret %s exists (replace its values with PUT /v1/secrets/%s, `gantry secret create --overwrite`)", name, name)
			}
			labels = stored.Metadata.Labels
		}
		action, err = s.putSecret(tx, name, req.Data, labels)
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.ctrl.Trigger()
	status := http.StatusOK
	if action == api.ActionCreated {
		status = http.StatusCreated
	}
	s.writeSecretInfo(w, r, name, status)
}

func (s *Server) writeSecretInfo(w http.ResponseWriter, r *http.Request, name string, status int) {
	var sec *api.Secret
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		var err error
		sec, _, err = tx.GetSecret(name)
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, status, sec)
}

func (s *Server) handleGetSecret(w http.ResponseWriter, r *http.Request) {
	s.writeSecretInfo(w, r, r.PathValue("name"), http.StatusOK)
}

func (s *Server) handleListSecrets(w http.ResponseWriter, r *http.Request) {
	var out []*api.Secret
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		var err error
		out, err = tx.ListSecrets()
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list[*api.Secret]{Items: api.NonNil(out)})
}

func (s *Server) handleDeleteSecret(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := s.store.Update(r.Context(), func(tx store.Tx) error {
		if _, _, err := tx.GetSecret(name); err != nil {
			return err
		}
		users, err := secretUsers(tx, name, func(string) bool { return true })
		if err != nil {
			return err
		}
		if len(users) > 0 {
			return errorf(http.StatusConflict, "in-use", "", "secret %s is used by %v: change them first", name, users)
		}
		if err := tx.DeleteSecret(name); err != nil {
			return err
		}
		return store.Record(tx, s.clock.Now(), api.EventNormal, "Deleted", api.KindSecret, name, "secret deleted")
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": "secret/" + name})
}

// pendingStamp marks a header whose Secret is applied in the same
// request with new values: it is stamped once the Secret is written.
const pendingStamp = "secret-revision:pending"

// secretStamp is what a monitoring header or env entry referencing a
// Secret key carries (the Secret's revision), after checking the key
// exists; inRequest are the values of Secrets applied with it.
func secretStamp(sr *secretread.Reader, inRequest map[string]map[string]string, ref api.SecretKeyRef) (string, error) {
	if values, ok := inRequest[ref.Name]; ok {
		if _, ok := values[ref.Key]; !ok {
			return "", &secretread.MissingError{Name: ref.Name, Key: ref.Key}
		}
		o, err := sr.Get(ref.Name)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return "", err
		}
		if err == nil && maps.Equal(o.Values, values) {
			return headerStamp(o.Revision), nil
		}
		return pendingStamp, nil
	}
	o, err := sr.Get(ref.Name)
	if errors.Is(err, store.ErrNotFound) {
		return "", &secretread.MissingError{Name: ref.Name}
	}
	if err != nil {
		return "", err
	}
	if _, ok := o.Values[ref.Key]; !ok {
		return "", &secretread.MissingError{Name: ref.Name, Key: ref.Key}
	}
	return headerStamp(o.Revision), nil
}

// admitSecrets reads the values of the Secret documents on the server
// and says what applying them changes; they come first in the result, so
// that they are written before what uses them.
func (s *Server) admitSecrets(secrets *secretread.Reader, docs []spec.Document) ([]admitted, map[string]map[string]string, error) {
	var out []admitted
	values := map[string]map[string]string{}
	for _, d := range docs {
		if d.Secret == nil {
			continue
		}
		name := d.Secret.Metadata.Name
		v, errs := spec.ResolveSecretValues(d.Secret, os.LookupEnv)
		if errs != nil {
			return nil, nil, locate(errs, d.Index)
		}
		values[name] = v
		a := admitted{item: api.ApplyItem{Kind: api.KindSecret, Name: name, Action: api.ActionCreated}, secret: d.Secret, values: v}
		old, err := secrets.Get(name)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, nil, err
		default:
			if !maps.Equal(old.Values, v) {
				a.item.Changes = append(a.item.Changes, "values")
			}
			if !maps.Equal(old.Meta.Labels, d.Secret.Metadata.Labels) {
				a.item.Changes = append(a.item.Changes, "metadata.labels")
			}
			a.item.Action = api.ActionConfigured
			if len(a.item.Changes) == 0 {
				a.item.Action = api.ActionUnchanged
			}
		}
		out = append(out, a)
	}
	return out, values, nil
}

// stampHeaderSecrets checks the Secret keys a cluster's monitoring
// headers use and stamps each header with its Secret's revision.
func stampHeaderSecrets(secrets *secretread.Reader, inRequest map[string]map[string]string, c *api.Cluster) error {
	var errs spec.ErrorList
	if c.Spec.Monitoring == nil {
		return nil
	}
	for i := range c.Spec.Monitoring.Headers {
		h := &c.Spec.Monitoring.Headers[i]
		if h.SecretRef.Name == "" {
			continue
		}
		stamp, err := secretStamp(secrets, inRequest, api.SecretKeyRef{Name: h.SecretRef.Name, Key: h.SecretRef.Key})
		if secretread.IsMissing(err) {
			errs = append(errs, &spec.FieldError{Path: fmt.Sprintf("spec.monitoring.headers[%d].secretRef", i), Message: err.Error()})
			continue
		}
		if err != nil {
			return err
		}
		h.ValueSHA256 = stamp
	}
	return errs.Err()
}

// stampPending stamps the headers whose Secret was written in the same
// apply.
func stampPending(secrets *secretread.Reader, c *api.Cluster) error {
	if c.Spec.Monitoring == nil {
		return nil
	}
	for i := range c.Spec.Monitoring.Headers {
		h := &c.Spec.Monitoring.Headers[i]
		if h.ValueSHA256 != pendingStamp {
			continue
		}
		o, err := secrets.Get(h.SecretRef.Name)
		if err != nil {
			return err
		}
		h.ValueSHA256 = headerStamp(o.Revision)
	}
	return nil
}

// checkSecretEnv checks that every Secret key a service uses exists: a
// spec.ErrorList names those that do not; another error is the store's.
func checkSecretEnv(secrets *secretread.Reader, inRequest map[string]map[string]string, svc *api.Service) error {
	var errs spec.ErrorList
	for _, k := range slices.Sorted(maps.Keys(svc.Spec.SecretEnv)) {
		_, err := secretStamp(secrets, inRequest, svc.Spec.SecretEnv[k])
		if secretread.IsMissing(err) {
			errs = append(errs, &spec.FieldError{Path: spec.SecretEnvPath(k) + ".secretRef", Message: err.Error()})
		} else if err != nil {
			return err
		}
	}
	return errs.Err()
}
