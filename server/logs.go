package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gantry-dev/gantry/internal/randid"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/server/relay"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// handleLogs streams a replica's output: GET /v1/replicas/{id}/logs
// ?follow=true&tail=N.
func (s *Server) handleLogs(w http.ResponseWriter, r *http.Request) {
	req, err := logRequestFrom(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	machine, pod, err := s.machineRunning(r, req.ReplicaID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if pod != nil {
		s.podLogs(w, r, req, *pod)
		return
	}
	if s.relayLogs(w, r, machine) {
		return
	}
	session := s.logs.Open(machine, req)
	defer s.logs.Close(req.ID)
	attach := time.NewTimer(s.cfg.LogAttachTimeout)
	defer attach.Stop()
	var first relay.Chunk
	select {
	case first = <-session.Chunks():
	case <-attach.C:
		s.writeError(w, r, errorf(http.StatusGatewayTimeout, "timeout", "", "the agent of machine %s did not send the logs of %s within %s", machine, req.ReplicaID, s.cfg.LogAttachTimeout))
		return
	case <-r.Context().Done():
		return
	}
	if first.Err != "" {
		s.writeError(w, r, errorf(http.StatusBadGateway, "agent-error", "", "machine %s: %s", machine, first.Err))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	for chunk := first; ; {
		if len(chunk.Data) > 0 {
			if _, err := w.Write(chunk.Data); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if chunk.EOF || chunk.Err != "" {
			return
		}
		select {
		case chunk = <-session.Chunks():
		case <-r.Context().Done():
			return
		}
	}
}

func logRequestFrom(r *http.Request) (api.LogRequest, error) {
	q := r.URL.Query()
	req := api.LogRequest{ID: randid.Hex(12), ReplicaID: r.PathValue("id"), Tail: -1}
	if v := q.Get("follow"); v != "" {
		follow, err := strconv.ParseBool(v)
		if err != nil {
			return req, errorf(http.StatusBadRequest, "invalid", "follow", "query parameter follow: want true or false, got %q", v)
		}
		req.Follow = follow
	}
	if v := q.Get("previous"); v != "" {
		previous, err := strconv.ParseBool(v)
		if err != nil {
			return req, errorf(http.StatusBadRequest, "invalid", "previous", "query parameter previous: want true or false, got %q", v)
		}
		req.Previous = previous
	}
	if req.Previous && req.Follow {
		return req, errorf(http.StatusBadRequest, "invalid", "follow", "query parameters follow and previous: an ended instance's output cannot be followed")
	}
	if v := q.Get("tail"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < -1 {
			return req, errorf(http.StatusBadRequest, "invalid", "tail", "query parameter tail: want a number of lines (-1 for all), got %q", v)
		}
		req.Tail = n
	}
	return req, nil
}

// machineRunning is the machine whose agent runs the replica now, or, for
// a Pod's replica, its cluster's settings.
func (s *Server) machineRunning(r *http.Request, replicaID string) (string, *spec.KubernetesSettings, error) {
	var machine string
	var pod *spec.KubernetesSettings
	err := s.store.View(r.Context(), func(tx store.Tx) error {
		rep, err := tx.GetReplica(replicaID)
		if err != nil {
			return err
		}
		if rep.Pod != "" {
			cl, err := tx.GetCluster(rep.Cluster)
			if err != nil {
				return err
			}
			settings, errs := spec.KubernetesConfig(cl.Spec.Provider)
			if errs != nil {
				return errs
			}
			pod = &settings
			return nil
		}
		if rep.Machine == "" {
			return errorf(http.StatusConflict, "conflict", "", "replica %s is %s on no machine: it has no logs yet", replicaID, rep.State)
		}
		m, err := tx.GetMachine(rep.Machine)
		if err != nil {
			return err
		}
		if m.JoinState != api.JoinJoined || m.UnreachableSince != nil || !m.Live() {
			return errorf(http.StatusConflict, "conflict", "", "machine %s of replica %s is not reachable (%s/%s)", m.ID, replicaID, m.JoinState, m.FleetState)
		}
		machine = m.ID
		return nil
	})
	return machine, pod, err
}

// podLogs streams a Pod's output from its Kubernetes API server.
func (s *Server) podLogs(w http.ResponseWriter, r *http.Request, req api.LogRequest, settings spec.KubernetesSettings) {
	rc, err := s.kube.PodLogs(r.Context(), settings, req.ReplicaID, req)
	if err != nil {
		s.writeError(w, r, errorf(http.StatusBadGateway, "kubernetes-error", "", "replica %s: %v", req.ReplicaID, err))
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := rc.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// handleLogRequests is the agent's long poll for log requests:
// GET /v1/machines/{id}/log-requests.
func (s *Server) handleLogRequests(w http.ResponseWriter, r *http.Request) {
	s.recordLogServer(r, r.PathValue("id"))
	reqs := s.logs.Take(r.Context(), r.PathValue("id"), s.cfg.LogPollWait)
	writeJSON(w, http.StatusOK, list[api.LogRequest]{Items: api.NonNil(reqs)})
}

// handleLogChunk takes one chunk of output from the agent:
// POST /v1/machines/{id}/log-streams/{stream}?eof=1|error=msg. 410 tells
// the agent the viewer has left.
func (s *Server) handleLogChunk(w http.ResponseWriter, r *http.Request) {
	session, ok := s.logs.Session(r.PathValue("stream"), r.PathValue("id"))
	if !ok {
		s.writeError(w, r, errorf(http.StatusGone, "gone", "", "no one is reading log stream %s", r.PathValue("stream")))
		return
	}
	data, err := s.readBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	chunk := relay.Chunk{Data: data, EOF: r.URL.Query().Get("eof") != "", Err: r.URL.Query().Get("error")}
	if !session.Post(r.Context(), chunk) {
		s.writeError(w, r, errorf(http.StatusGone, "gone", "", "the reader of log stream %s has left", r.PathValue("stream")))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
