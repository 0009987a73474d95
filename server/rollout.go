package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// rolloutOf reads a service's deployment and revisions (newest last)
// from the control loop's memory.
func rolloutOf(tx store.Tx, service string) (api.Rollout, error) {
	out := api.Rollout{Revisions: []api.Revision{}}
	entries, err := tx.ListMemoryPrefix(decide.RevisionPrefix(service))
	if err != nil {
		return out, err
	}
	if raw, err := tx.GetMemory(decide.DeploymentKey(service)); err == nil {
		entries[decide.DeploymentKey(service)] = raw
	} else if !errors.Is(err, store.ErrNotFound) {
		return out, err
	}
	mem, err := decide.DecodeMemory(entries)
	if err != nil {
		return out, err
	}
	if d, ok := mem.Deployments[service]; ok {
		d.AvailableSince = nil
		out.Deployment = &d
	}
	for _, r := range mem.Revisions {
		out.Revisions = append(out.Revisions, r)
	}
	sort.Slice(out.Revisions, func(i, j int) bool { return out.Revisions[i].Number < out.Revisions[j].Number })
	return out, nil
}

func (s *Server) handleGetRollout(w http.ResponseWriter, r *http.Request) {
	var out api.Rollout
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		if _, err := tx.GetService(r.PathValue("name")); err != nil {
			return err
		}
		var err error
		out, err = rolloutOf(tx, r.PathValue("name"))
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// editService changes a stored service the way an apply would (the same
// defaults, checks and event), in one transaction.
func (s *Server) editService(w http.ResponseWriter, r *http.Request, reason string, edit func(tx store.Tx, svc *api.Service) (string, error)) {
	var svc *api.Service
	err := s.store.Update(r.Context(), func(tx store.Tx) error {
		var err error
		if svc, err = tx.GetService(r.PathValue("name")); err != nil {
			return err
		}
		msg, err := edit(tx, svc)
		if err != nil {
			return err
		}
		spec.DefaultService(svc)
		if errs := spec.ValidateService(svc); errs != nil {
			return errs
		}
		admitted, err := s.admit(tx, []spec.Document{{Service: svc}})
		if err != nil {
			return err
		}
		if _, err := s.write(tx, admitted); err != nil {
			return err
		}
		return store.Record(tx, s.clock.Now(), api.EventNormal, reason, api.KindService, svc.Metadata.Name, "%s", msg)
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.ctrl.Trigger()
	writeJSON(w, http.StatusOK, svc)
}

func (s *Server) handleScale(w http.ResponseWriter, r *http.Request) {
	var req api.ScaleRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.editService(w, r, "Scaled", func(_ store.Tx, svc *api.Service) (string, error) {
		from := svc.Spec.DesiredReplicas()
		svc.Spec.Replicas = &req.Replicas
		return fmt.Sprintf("scaled from %d to %d replicas", from, req.Replicas), nil
	})
}

func (s *Server) handleRolloutRestart(w http.ResponseWriter, r *http.Request) {
	s.editService(w, r, "RolloutRestart", func(_ store.Tx, svc *api.Service) (string, error) {
		svc.Spec.RestartedAt = s.clock.Now().UTC().Format(time.RFC3339Nano)
		return "restart requested: a new revision replaces every replica", nil
	})
}

func (s *Server) handleRolloutPause(w http.ResponseWriter, r *http.Request) {
	s.setPaused(w, r, true)
}

func (s *Server) handleRolloutResume(w http.ResponseWriter, r *http.Request) {
	s.setPaused(w, r, false)
}

func (s *Server) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	reason, msg := "RolloutResumed", "deployments resume"
	if paused {
		reason, msg = "RolloutPaused", "deployments pause where they are"
	}
	s.editService(w, r, reason, func(_ store.Tx, svc *api.Service) (string, error) {
		svc.Spec.Update.Paused = paused
		return msg, nil
	})
}

// handleRolloutUndo returns a service to a revision: the one before the
// current, or the one asked for.
func (s *Server) handleRolloutUndo(w http.ResponseWriter, r *http.Request) {
	var req api.RolloutUndo
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.editService(w, r, "RolloutUndo", func(tx store.Tx, svc *api.Service) (string, error) {
		ro, err := rolloutOf(tx, svc.Metadata.Name)
		if err != nil {
			return "", err
		}
		to, err := undoTarget(ro, req.ToRevision)
		if err != nil {
			return "", err
		}
		svc.Spec = spec.WithTemplate(svc.Spec, to.Spec)
		return fmt.Sprintf("returning to revision %d", to.Number), nil
	})
}

func undoTarget(ro api.Rollout, number int64) (api.Revision, error) {
	current := ""
	if ro.Deployment != nil {
		current = ro.Deployment.Revision
	}
	for i := len(ro.Revisions) - 1; i >= 0; i-- {
		rev := ro.Revisions[i]
		if number == 0 && rev.Hash != current && rev.Failed == "" || number != 0 && rev.Number == number {
			return rev, nil
		}
	}
	if number != 0 {
		return api.Revision{}, errorf(http.StatusNotFound, "not-found", "toRevision", "toRevision: no revision %d (kept: %s)", number, revisionNumbers(ro))
	}
	return api.Revision{}, errorf(http.StatusConflict, "conflict", "", "no earlier good revision to return to (kept: %s)", revisionNumbers(ro))
}

func revisionNumbers(ro api.Rollout) string {
	if len(ro.Revisions) == 0 {
		return "none"
	}
	numbers := make([]string, len(ro.Revisions))
	for i, r := range ro.Revisions {
		numbers[i] = fmt.Sprint(r.Number)
	}
	return strings.Join(numbers, ", ")
}

// handleRolloutPromote lets a deployment waiting on its canaries go on:
// the request is left in the control loop's memory for its next pass.
func (s *Server) handleRolloutPromote(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var out api.Rollout
	err := s.store.Update(r.Context(), func(tx store.Tx) error {
		svc, err := tx.GetService(name)
		if err != nil {
			return err
		}
		if svc.Spec.Update.Canary == 0 {
			return errorf(http.StatusConflict, "conflict", "spec.update.canary", "service %s deploys without canaries (spec.update.canary is 0): nothing to promote", name)
		}
		if out, err = rolloutOf(tx, name); err != nil {
			return err
		}
		d := out.Deployment
		if d == nil || d.Done() || d.Promoted {
			return errorf(http.StatusConflict, "conflict", "", "service %s has no deployment waiting on canaries", name)
		}
		hashJSON, err := json.Marshal(d.Revision)
		if err != nil {
			return err
		}
		if err := tx.PutMemory(decide.PromotionKey(name), string(hashJSON)); err != nil {
			return err
		}
		return store.Record(tx, s.clock.Now(), api.EventNormal, "RolloutPromote", api.KindService, name, "revision %d promoted by hand", d.Number)
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.ctrl.Trigger()
	writeJSON(w, http.StatusOK, out)
}
