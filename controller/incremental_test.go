package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/decidetest"
	"github.com/gantry-dev/gantry/metrics"
	"github.com/gantry-dev/gantry/store"
)

// beat records a heartbeat of every joined machine, as the heartbeat
// path does: in the liveness table, outside the change feed.
func (e *env) beat(except ...string) {
	e.update(func(tx store.Tx) error {
		ms, err := tx.ListMachines(store.MachineFilter{LiveOnly: true})
		if err != nil {
			return err
		}
		beats := map[string]time.Time{}
		for _, m := range ms {
			if m.JoinState == api.JoinJoined && !strings.Contains(strings.Join(except, ","), m.ID) {
				beats[m.ID] = e.clock.Now()
			}
		}
		return tx.PutLiveness(beats)
	})
}

// settle passes, joining machines and heartbeating, until a pass
// decides nothing.
func (e *env) settle() {
	e.t.Helper()
	var last decide.Plan
	for i := 0; i < 30; i++ {
		e.join()
		e.beat()
		plan := e.pass()
		if e.ctrl.quiet != nil {
			return
		}
		last = plan
		e.clock.Step(time.Second)
	}
	e.t.Fatalf("the fleet did not settle: %s", decidetest.Describe(last))
}

func passes(m *metrics.Metrics, mode string) float64 {
	return testutil.ToFloat64(m.Passes.Passes.WithLabelValues(mode))
}

// Once a pass decides nothing, the next are skipped while heartbeats
// flow and nothing else changes; a machine falling silent wakes the loop
// at its deadline, and so does a write.
func TestPassesSleepWhileNothingChanges(t *testing.T) {
	e := newEnv(t)
	m := metrics.New(prometheus.NewRegistry())
	e.ctrl.Metrics = m
	e.apply(twoMachines)
	e.settle()
	// The look for machines to remove that the settled fleet is owed:
	// the settling passes came within ConsolidateInterval of the last.
	e.clock.Step(e.cfg.Decide.ConsolidateInterval)
	e.beat()
	e.pass()
	decided := passes(m, metrics.PassDecided)
	for i := 0; i < 5; i++ {
		e.clock.Step(2 * time.Second)
		e.beat()
		e.pass()
	}
	if got := passes(m, metrics.PassSkipped); got != 5 || passes(m, metrics.PassDecided) != decided {
		t.Fatalf("steady passes: %v skipped (want 5), %v decided (want %v)", got, passes(m, metrics.PassDecided), decided)
	}
	silent := e.machines()[0].ID
	limit := e.cfg.Decide.HeartbeatIntervalFor(2) * time.Duration(e.cfg.Decide.MissedHeartbeats)
	for waited := time.Duration(0); waited <= limit; waited += 2 * time.Second {
		e.clock.Step(2 * time.Second)
		e.beat(silent)
		if plan := e.pass(); len(plan.Unreachable) > 0 {
			if len(plan.Unreachable) != 1 || plan.Unreachable[0].Machine != silent || waited < limit-2*time.Second {
				t.Fatalf("after %s of silence (limit %s): unreachable %+v", waited, limit, plan.Unreachable)
			}
			e.apply(strings.Replace(twoMachines, "minSize: 2", "minSize: 3", 1))
			if plan := e.pass(); len(plan.Launches) == 0 {
				t.Fatalf("a write (minSize 3) woke no decision: %s", decidetest.Describe(plan))
			}
			return
		}
	}
	t.Fatalf("the silent machine %s was never marked unreachable: %v passes skipped", silent, passes(m, metrics.PassSkipped))
}

// The safety net runs a full pass every FullPassInterval although nothing
// changed; it finds nothing on a sound loop. Told something the
// incremental path cannot see (here the controller's own settings
// changed under it: an idle machine's TTL shortened), it finds the work,
// does it, and says so in a metric and an event.
func TestSafetyNetRunsAFullPassAndCountsWhatItFinds(t *testing.T) {
	e := newEnv(t)
	e.cfg.FullPassInterval = time.Minute
	e.restart()
	m := metrics.New(prometheus.NewRegistry())
	e.ctrl.Metrics = m
	e.apply(twoMachines)
	e.settle()
	e.apply(strings.Replace(twoMachines, "minSize: 2", "minSize: 1", 1))
	e.settle()
	for i := 0; i < 35; i++ {
		e.clock.Step(2 * time.Second)
		e.beat()
		if plan := e.pass(); len(plan.Drains) > 0 {
			t.Fatalf("drained within the idle TTL: %+v", plan.Drains)
		}
	}
	if got := passes(m, metrics.PassSafety); got != 1 || testutil.ToFloat64(m.SafetyNetFindings) != 0 {
		t.Fatalf("after 70 s: %v safety passes (want 1), %v findings (want 0)", got, testutil.ToFloat64(m.SafetyNetFindings))
	}
	e.ctrl.cfg.Decide.Planner.EmptyMachineTTL = 10 * time.Second
	var drained bool
	for i := 0; i < 35 && !drained; i++ {
		e.clock.Step(2 * time.Second)
		e.beat()
		drained = len(e.pass().Drains) > 0
	}
	if !drained || testutil.ToFloat64(m.SafetyNetFindings) != 1 {
		t.Fatalf("the safety net did not find the drain the incremental loop missed: drained %v, findings %v", drained, testutil.ToFloat64(m.SafetyNetFindings))
	}
	if ev := e.events("ControlLoop", "leader"); len(ev) != 1 || ev[0].Reason != "SafetyNetFound" {
		t.Fatalf("events: %+v", ev)
	}
}
