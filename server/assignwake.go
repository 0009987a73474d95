package server

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
)

// assignmentWakes tell agents at once that their assignments changed, so
// that a replica placed on a machine starts without waiting for the
// machine's next heartbeat: each server follows the change feed (with
// the names, refreshNames) and notes, by machine, the revision of the
// last change of a replica on it or leaving it (or that was). An
// agent's poll names the revision it knows of; it is answered as soon as
// its machine changed after it (at once when it already did), and the
// agent heartbeats for its assignments.
type assignmentWakes struct {
	mu sync.Mutex
	// rev is the feed revision read up to.
	rev      int64
	machines map[string]*machineWake
	// where is each replica's machine and the machine it is leaving, as
	// its last change left them: a replica moved or deleted wakes the
	// machines it was on too.
	where map[string][2]string
}

type machineWake struct {
	last    int64
	changed chan struct{}
}

func newAssignmentWakes() *assignmentWakes {
	return &assignmentWakes{machines: map[string]*machineWake{}, where: map[string][2]string{}}
}

// replicaAt notes a replica's change: the machines it is on or leaving,
// now and before the change, go into touched.
func (a *assignmentWakes) replicaAt(id, machine, previous string, deleted bool, touched map[string]bool) {
	a.mu.Lock()
	before := a.where[id]
	if deleted {
		delete(a.where, id)
	} else {
		a.where[id] = [2]string{machine, previous}
	}
	a.mu.Unlock()
	for _, m := range []string{before[0], before[1], machine, previous} {
		if m != "" {
			touched[m] = true
		}
	}
}

// noted records that the changes up to rev touched these machines, and
// that the gone ones (terminated) need no more note.
func (a *assignmentWakes) noted(rev int64, machines map[string]bool, gone []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rev = max(a.rev, rev)
	for id := range machines {
		e := a.entry(id)
		e.last = rev
		close(e.changed)
		e.changed = make(chan struct{})
	}
	for _, id := range gone {
		delete(a.machines, id)
	}
}

func (a *assignmentWakes) entry(id string) *machineWake {
	e := a.machines[id]
	if e == nil {
		e = &machineWake{changed: make(chan struct{})}
		a.machines[id] = e
	}
	return e
}

// wait returns once machine changed after since (changed true), or after
// limit, with the revision the answer is good to: the next poll's since.
// A negative since (an agent's first poll) is answered at once.
func (a *assignmentWakes) wait(ctx context.Context, machine string, since int64, limit time.Duration) (int64, bool) {
	a.mu.Lock()
	e := a.entry(machine)
	if since < 0 || e.last > since {
		rev := a.rev
		a.mu.Unlock()
		return rev, since >= 0
	}
	changed := e.changed
	a.mu.Unlock()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-changed:
	case <-timer.C:
	case <-ctx.Done():
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return max(a.rev, since), e.last > since
}

// handleAssignmentsWait is an agent's poll: GET
// /v1/machines/{id}/assignments/wait?since=N answers {"revision": M,
// "changed": true} once the machine's assignments may have changed after
// revision N, or changed false after Names.Wait. Without since (the
// agent's first poll) it answers at once, with the revision to poll
// from.
func (s *Server) handleAssignmentsWait(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	since, err := int64(-1), error(nil) // no since: the agent's first poll
	if v := r.URL.Query().Get("since"); v != "" {
		since, err = strconv.ParseInt(v, 10, 64)
	}
	if err != nil || since < -1 {
		s.writeError(w, r, errorf(http.StatusBadRequest, "invalid", "since", "query parameter since: want a revision, got %q", r.URL.Query().Get("since")))
		return
	}
	err = s.store.View(r.Context(), func(tx store.Tx) error {
		m, err := tx.GetMachine(id)
		if err == nil && !m.Live() {
			return errorf(http.StatusGone, "gone", "", "machine %s is terminated", id)
		}
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rev, changed := s.wakes.wait(r.Context(), id, since, s.cfg.Names.Wait)
	writeJSON(w, http.StatusOK, api.AssignmentsWait{Revision: rev, Changed: changed})
}
