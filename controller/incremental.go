package controller

import (
	"fmt"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/metrics"
)

// quietPass is a pass that decided nothing: the store revision and the
// observations it decided from, and its plan (whose Wake says what may
// change its mind).
type quietPass struct {
	revision int64
	snap     *decide.Snapshot
	plan     decide.Plan
}

// asleep reports whether a pass on snap, read at revision, would decide
// nothing: the last pass decided nothing, the store has not changed
// since (heartbeats are not in its revision), nor the observations, and
// no deadline or silence came (decide.Asleep).
func (c *Controller) asleep(snap *decide.Snapshot, revision int64, now time.Time) bool {
	q := c.quiet
	if q == nil || c.cfg.FullPassInterval <= 0 || q.revision != revision || !decide.SameObservations(q.snap, snap) {
		return false
	}
	return decide.Asleep(c.cfg.Decide, q.plan, snap, now)
}

// safetyNetDue: the last full pass was FullPassInterval ago.
func (c *Controller) safetyNetDue(now time.Time) bool {
	return now.Sub(c.lastDecided) >= c.cfg.FullPassInterval
}

// checkSafetyNet counts a full pass run although the loop was asleep,
// and what it found: anything is a change the incremental path missed,
// which the pass carries out, and says in a metric, an event and the log.
func (c *Controller) checkSafetyNet(asleep bool, snap *decide.Snapshot, mem decide.Memory, plan *decide.Plan) {
	if !asleep {
		c.Metrics.Passed(metrics.PassDecided)
		return
	}
	c.Metrics.Passed(metrics.PassSafety)
	if plan.Idle(snap, mem) {
		return
	}
	c.Metrics.SafetyNetFound()
	msg := fmt.Sprintf("the full pass found work the incremental loop had skipped (a bug in it; carried out now): %d store step(s), %d event(s), describes %v, lists %v",
		len(plan.CreateReplicas)+len(plan.DeleteReplicas)+len(plan.Assignments)+len(plan.Terminates)+len(plan.Drains)+len(plan.Launches),
		len(plan.Events), plan.Describes, plan.Lists)
	c.Log.Warn("safety net", "found", msg)
	plan.Events = append(plan.Events, decide.Event{Type: api.EventWarning, Reason: "SafetyNetFound", ObjectKind: "ControlLoop", ObjectName: "leader", Message: msg})
}

// rememberQuiet keeps a pass that decided nothing, so the next passes
// can be skipped while nothing changes.
func (c *Controller) rememberQuiet(snap *decide.Snapshot, mem decide.Memory, revision int64, plan decide.Plan) {
	if plan.Idle(snap, mem) {
		c.quiet = &quietPass{revision: revision, snap: snap.Observations(), plan: plan}
	}
}
