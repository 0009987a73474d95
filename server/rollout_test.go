package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
)

const rolloutService = `kind: Service
metadata: {name: web}
spec:
  cluster: dev
  command: [sleep, "60"]
  env: {V: "1"}
  replicas: 2
  resources: {cpu: 100m, memory: 64Mi}
`

// The rollout API: revisions appear as the control loop makes them,
// scale is no revision, restart and undo are, bad requests name what is
// wrong and change nothing.
func TestRolloutAPI(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	if _, err := ts.admin.Apply(ctx, []byte(rolloutService)); err != nil {
		t.Fatal(err)
	}
	// revisions waits for the deployment of revision n.
	revisions := func(n int) *api.Rollout {
		t.Helper()
		var ro *api.Rollout
		waitFor(t, 30*time.Second, "revisions", func() bool {
			var err error
			ro, err = ts.admin.Rollout(ctx, "web")
			return err == nil && ro.Deployment != nil && ro.Deployment.Number == int64(n)
		})
		return ro
	}
	revisions(1)
	if _, err := ts.admin.Apply(ctx, []byte(strings.Replace(rolloutService, `V: "1"`, `V: "2"`, 1))); err != nil {
		t.Fatal(err)
	}
	ro := revisions(2)
	if ro.Revisions[1].Spec.Env["V"] != "2" || ro.Revisions[0].Spec.Replicas != nil {
		t.Fatalf("revisions: %+v", ro.Revisions)
	}

	svc, err := ts.admin.Scale(ctx, "web", 5)
	if err != nil || svc.Spec.DesiredReplicas() != 5 {
		t.Fatalf("scale: %v %+v", err, svc)
	}
	waitFor(t, 30*time.Second, "5 replicas", func() bool {
		rs, err := ts.admin.ListReplicas(ctx, "web")
		return err == nil && len(rs) == 5
	})
	if ro, _ := ts.admin.Rollout(ctx, "web"); len(ro.Revisions) != 2 {
		t.Fatalf("scaling made a revision: %+v", ro.Revisions)
	}

	if _, err := ts.admin.RolloutAction(ctx, "web", "undo", api.RolloutUndo{ToRevision: 9}); !client.IsStatus(err, http.StatusNotFound) || !strings.Contains(err.Error(), "toRevision: no revision 9 (kept: 1, 2)") {
		t.Fatalf("undo to a revision that is not kept: %v", err)
	}
	if _, err := ts.admin.Scale(ctx, "web", -1); !client.IsStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), "spec.replicas") {
		t.Fatalf("scale to -1: %v", err)
	}
	if _, err := ts.admin.Scale(ctx, "nope", 1); !client.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("scale of a missing service: %v", err)
	}
	if _, err := ts.admin.Promote(ctx, "web"); !client.IsStatus(err, http.StatusConflict) {
		t.Fatalf("promote without canaries: %v", err)
	}
	if svc, _ := ts.admin.GetService(ctx, "web"); svc.Spec.DesiredReplicas() != 5 || svc.Spec.Env["V"] != "2" {
		t.Fatalf("a refused request changed the service: %+v", svc.Spec)
	}

	beforeUndo := time.Now()
	if _, err := ts.admin.RolloutAction(ctx, "web", "undo", nil); err != nil {
		t.Fatal(err)
	}
	ro = revisions(3)
	if last := ro.Revisions[len(ro.Revisions)-1]; len(ro.Revisions) != 2 || last.Spec.Env["V"] != "1" || !strings.Contains(last.Cause, "revision 1 again") ||
		last.CreatedAt.Before(beforeUndo.Add(-time.Second)) {
		t.Fatalf("undo (revision 1 comes back as 3, made now): %+v", ro.Revisions)
	}
	if _, err := ts.admin.RolloutAction(ctx, "web", "restart", nil); err != nil {
		t.Fatal(err)
	}
	if last := revisions(4).Revisions[2]; last.Cause != "restart" || last.Spec.RestartedAt == "" {
		t.Fatalf("restart: %+v", last)
	}
	if svc, err := ts.admin.RolloutAction(ctx, "web", "pause", nil); err != nil || !svc.Spec.Update.Paused {
		t.Fatalf("pause: %v", err)
	}
	if _, err := ts.admin.RolloutAction(ctx, "web", "resume", nil); err != nil {
		t.Fatal(err)
	}
	services, err := ts.admin.ListServices(ctx)
	if err != nil || services[0].Status.Revision != 4 || services[0].Status.Deployment == "" {
		t.Fatalf("the service's status says no revision: %v %+v", err, services[0].Status)
	}
}

// A pause and a restart are the rollout commands': applying the same file
// again leaves the service paused and restarted, as kubectl apply leaves
// a paused Deployment paused; resume undoes the pause.
func TestApplyKeepsAPauseAndARestart(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	if _, err := ts.admin.Apply(ctx, []byte(rolloutService)); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.admin.RolloutAction(ctx, "web", "pause", nil); err != nil {
		t.Fatal(err)
	}
	restarted, err := ts.admin.RolloutAction(ctx, "web", "restart", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := ts.admin.Apply(ctx, []byte(rolloutService))
	if err != nil {
		t.Fatal(err)
	}
	if a := res.Results[0]; a.Action != api.ActionUnchanged {
		t.Errorf("the same file applied again: %s %v, want unchanged", a.Action, a.Changes)
	}
	svc, err := ts.admin.GetService(ctx, "web")
	if err != nil || !svc.Spec.Update.Paused || svc.Spec.RestartedAt != restarted.Spec.RestartedAt {
		t.Fatalf("after the apply: paused %v, restartedAt %q (want %q), %v", svc.Spec.Update.Paused, svc.Spec.RestartedAt, restarted.Spec.RestartedAt, err)
	}
	if _, err := ts.admin.RolloutAction(ctx, "web", "resume", nil); err != nil {
		t.Fatal(err)
	}
	if svc, err := ts.admin.GetService(ctx, "web"); err != nil || svc.Spec.Update.Paused {
		t.Fatalf("after resume: paused %v %v", svc.Spec.Update.Paused, err)
	}
}
