package server

import (
	"net/http"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
)

// handlePlan is `gantry plan` against this server: the body's resources,
// checked as apply checks them, replace the live ones of the same name,
// and the control loop's own decide runs on the result without acting.
// Nothing is written.
func (s *Server) handlePlan(w http.ResponseWriter, r *http.Request) {
	docs, err := s.parseBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var clusters []*api.Cluster
	var services []*api.Service
	err = s.store.View(r.Context(), func(tx store.Tx) error {
		clusters, services = nil, nil
		if err := keepRolloutMarks(tx, docs); err != nil {
			return err
		}
		admitted, err := s.admit(tx, docs)
		for _, a := range admitted {
			switch {
			case a.cluster != nil:
				clusters = append(clusters, a.cluster)
			case a.service != nil: // a failover group's services are admitted as services
				services = append(services, a.service)
			}
		}
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	plan, err := s.ctrl.DryRun(r.Context(), clusters, services)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, plan.Capacity)
}
