package decide_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/decidetest"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/spec"
)

// serving is a harness with service web of n replicas running revision 1
// on one large machine, its first deployment complete.
func serving(t *testing.T, n int, edit ...func(*api.ServiceSpec)) *decidetest.Harness {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "large", 1, 1))
	m := h.Machine("c", "g", "large")
	h.Service("web", "c", n, "100m", "64Mi", edit...)
	for i := 0; i < n; i++ {
		h.Replica("web", i, m.ID)
	}
	for i := 0; i < 20 && h.Memory.Deployments["web"].State != api.DeployComplete; i++ {
		h.Pass()
		h.Step(5 * time.Second)
	}
	if d := h.Memory.Deployments["web"]; d.State != api.DeployComplete || d.Number != 1 {
		t.Fatalf("the first deployment: %+v", d)
	}
	return h
}

// change edits web's spec the way an apply would.
func change(h *decidetest.Harness, edit func(*api.ServiceSpec)) {
	svc := h.Snap.Services[0]
	c := *svc
	c.Spec.Env = map[string]string{}
	for k, v := range svc.Spec.Env {
		c.Spec.Env[k] = v
	}
	edit(&c.Spec)
	c.Metadata.Generation++
	h.Snap.Services[0] = &c
}

func currentHash(h *decidetest.Harness) string {
	return spec.RevisionHash(h.Snap.Services[0].Spec, h.Snap.SecretRevisions)
}

// step is one heartbeat period: agents run what they were given (bad
// applied to the new revision's replicas), then a pass.
func step(h *decidetest.Harness, newHash string, bad func(*api.Replica)) decide.Plan {
	h.Run()
	if bad != nil {
		for _, r := range h.Snap.Replicas {
			if r.SpecHash == newHash && r.Machine != "" {
				bad(r)
			}
		}
	}
	h.Heartbeat()
	plan := h.Pass()
	h.Step(5 * time.Second)
	return plan
}

// available counts the replicas in service that are available (a
// retiring one runs on, out of its name, until drained).
func available(h *decidetest.Harness) (n int) {
	for _, r := range inService(h) {
		if replica.Available(r) {
			n++
		}
	}
	return n
}

// inService are the replicas not retiring.
func inService(h *decidetest.Harness) []*api.Replica {
	var out []*api.Replica
	for _, r := range h.Snap.Replicas {
		if r.RetiringSince == nil {
			out = append(out, r)
		}
	}
	return out
}

// removed are the replicas a plan takes out of service: those it
// retires, and those it deletes that were not retiring already.
func removed(p decide.Plan) []decide.ReplicaDelete {
	out := slices.Clone(p.RetireReplicas)
	for _, d := range p.DeleteReplicas {
		if !strings.HasPrefix(d.Reason, "drained for ") {
			out = append(out, d)
		}
	}
	return out
}

// A change of what replicas run rolls them one at a time (maxSurge 1,
// maxUnavailable 0): never more than 7 replicas of 6, never fewer than 6
// available, and the old ones all go.
func TestRollingDeploymentKeepsTheFloor(t *testing.T) {
	h := serving(t, 6)
	change(h, func(s *api.ServiceSpec) { s.Env["V"] = "2" })
	hash := currentHash(h)
	for i := 0; i < 60 && !deployed(h, hash); i++ {
		step(h, hash, nil)
		if n := len(h.Snap.Replicas); n > 7 { // retiring ones count: they still run
			t.Fatalf("pass %d: %d replicas, over 6 + maxSurge 1", i, n)
		}
		if n := available(h); n < 6 {
			t.Fatalf("pass %d: %d available, under 6 − maxUnavailable 0", i, n)
		}
	}
	d := h.Memory.Deployments["web"]
	if d.State != api.DeployComplete || d.Number != 2 || d.Stable != hash {
		t.Fatalf("deployment: %+v", d)
	}
	step(h, hash, nil) // the last old replica drains (3 s) and goes
	for _, r := range h.Snap.Replicas {
		if r.SpecHash != hash {
			t.Errorf("replica %s still runs %s", r.ID, r.SpecHash)
		}
	}
	if len(h.Snap.Replicas) != 6 {
		t.Fatalf("%d replicas after the deployment", len(h.Snap.Replicas))
	}
}

// maxUnavailable 2 and maxSurge 0 replace two at a time, in place.
func TestMaxUnavailableReplacesInPlace(t *testing.T) {
	h := serving(t, 6, func(s *api.ServiceSpec) {
		zero, two := 0, 2
		s.Update.MaxSurge, s.Update.MaxUnavailable = &zero, &two
	})
	change(h, func(s *api.ServiceSpec) { s.Args = []string{"--v2"} })
	hash := currentHash(h)
	for i := 0; i < 60 && !deployed(h, hash); i++ {
		plan := step(h, hash, nil)
		if len(removed(plan)) > 2 {
			t.Fatalf("pass %d removed %d replicas at once", i, len(removed(plan)))
		}
		if n := len(h.Snap.Replicas); n > 6 {
			t.Fatalf("pass %d: %d replicas with maxSurge 0", i, n)
		}
		if n := available(h); n < 4 {
			t.Fatalf("pass %d: %d available, under 6 − 2", i, n)
		}
	}
	if d := h.Memory.Deployments["web"]; d.State != api.DeployComplete {
		t.Fatalf("deployment: %+v", d)
	}
}

// An old replica stops only once the new one has been healthy for
// minHealthySeconds.
func TestMinHealthySecondsHoldsTheOldReplica(t *testing.T) {
	h := serving(t, 1, func(s *api.ServiceSpec) { s.Update.MinHealthySeconds = 30 })
	change(h, func(s *api.ServiceSpec) { s.Env["V"] = "2" })
	hash := currentHash(h)
	step(h, hash, nil) // creates and places the new replica
	step(h, hash, nil) // it runs from here
	for i := 0; i < 5; i++ {
		if plan := step(h, hash, nil); len(plan.DeleteReplicas) != 0 {
			t.Fatalf("%s after the new replica ran, the old one went (minHealthySeconds 30)", time.Duration(i+1)*5*time.Second)
		}
	}
	for i := 0; i < 3 && len(h.Snap.Replicas) > 1; i++ {
		step(h, hash, nil)
	}
	if len(h.Snap.Replicas) != 1 || h.Snap.Replicas[0].SpecHash != hash {
		t.Fatalf("the old replica did not go after 30 s: %+v", h.Snap.Replicas)
	}
}

// Scaling is not a revision: nothing restarts, the highest indexes go,
// new indexes run the current revision.
func TestScalingIsNotARevision(t *testing.T) {
	h := serving(t, 2)
	hash := currentHash(h)
	change(h, func(s *api.ServiceSpec) { n := 1; s.Replicas = &n })
	plan := step(h, hash, nil)
	if len(removed(plan)) != 1 || removed(plan)[0].ID != "web-1" || len(plan.CreateReplicas) != 0 {
		t.Fatalf("scale down: removed %+v, created %d", removed(plan), len(plan.CreateReplicas))
	}
	change(h, func(s *api.ServiceSpec) { n := 3; s.Replicas = &n })
	plan = step(h, hash, nil)
	if len(removed(plan)) != 0 || len(plan.CreateReplicas) != 2 {
		t.Fatalf("scale up: removed %+v, created %d", removed(plan), len(plan.CreateReplicas))
	}
	for _, r := range plan.CreateReplicas {
		if r.SpecHash != hash {
			t.Errorf("scale up made %s of another revision", r.ID)
		}
	}
	// The pass that made them counts them: three of the revision, one up.
	if d := plan.Memory.Deployments["web"]; d.Updated != 3 || d.Available != 1 || d.Old != 0 {
		t.Fatalf("scale up counted %d updated, %d available, %d old; want 3, 1, 0", d.Updated, d.Available, d.Old)
	}
	if d := h.Memory.Deployments["web"]; d.Number != 1 || len(h.Memory.Revisions) != 1 {
		t.Fatalf("scaling made a revision: %+v, %d revisions", d, len(h.Memory.Revisions))
	}
}

// A new revision whose replica crashes, restarts, fails its health check
// or never progresses fails: its replicas go, the old ones never do, an
// event says why, and the service returns to the last good revision.
func TestBadRevisionFailsAndReverts(t *testing.T) {
	cases := map[string]struct {
		bad  func(*api.Replica)
		edit func(*api.ServiceSpec)
		want string
	}{
		"crash":     {bad: func(r *api.Replica) { r.State, r.Reason = api.ReplicaCrashed, "exit status 1" }, want: "crashed: exit status 1"},
		"restarts":  {bad: func(r *api.Replica) { r.Restarts = 2 }, want: "restarted 2 time(s)"},
		"unhealthy": {bad: func(r *api.Replica) { r.Health = api.HealthUnhealthy }, want: "fails its health check"},
		"never placed": {edit: func(s *api.ServiceSpec) { s.Placement.NodeSelector = map[string]string{"disk": "nvme"} },
			want: "no progress for 1m0s"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := serving(t, 3, func(s *api.ServiceSpec) { s.Update.ProgressDeadlineSeconds = 60 })
			good := currentHash(h)
			change(h, func(s *api.ServiceSpec) {
				s.Args = []string{"--broken"}
				if tc.edit != nil {
					tc.edit(s)
				}
			})
			bad := currentHash(h)
			var reverts []decide.Revert
			for i := 0; i < 40 && len(reverts) == 0; i++ {
				plan := step(h, bad, tc.bad)
				reverts = plan.Reverts
				for _, d := range plan.DeleteReplicas {
					if r := h.ReplicaByID(d.ID); r == nil && !strings.Contains(d.Reason, "failed") {
						t.Fatalf("pass %d deleted %s: %s", i, d.ID, d.Reason)
					}
				}
				if n := available(h); n < 3 {
					t.Fatalf("pass %d: %d old replicas available, want 3", i, n)
				}
			}
			d := h.Memory.Deployments["web"]
			if d.State != api.DeployFailed || !strings.Contains(d.Reason, tc.want) || len(reverts) != 1 || reverts[0].To.Hash != good {
				t.Fatalf("deployment %+v, reverts %+v", d, reverts)
			}
			if !hasEventIn(h.Events, "DeploymentFailed", tc.want) {
				t.Fatalf("no DeploymentFailed event saying %q: %+v", tc.want, h.Events)
			}
			for i := 0; i < 5 && !deployed(h, good); i++ {
				step(h, good, nil)
			}
			d = h.Memory.Deployments["web"]
			if d.State != api.DeployComplete || d.Revision != good || d.Number != 3 || d.RevertOf != 2 {
				t.Fatalf("after the revert: %+v", d)
			}
			if currentHash(h) != good || len(inService(h)) != 3 {
				t.Fatalf("the service is not back on its good revision: %d replicas", len(inService(h)))
			}
			if h.Memory.Revisions[decide.RevisionKey("web", bad)].Failed == "" {
				t.Fatal("the failed revision is not marked failed")
			}
		})
	}
}

// Without autoRevert a failed deployment halts: the old replicas stay,
// the failed ones go, the spec is left as applied.
func TestFailedDeploymentWithoutAutoRevertHalts(t *testing.T) {
	h := serving(t, 2, func(s *api.ServiceSpec) { no := false; s.Update.AutoRevert = &no })
	change(h, func(s *api.ServiceSpec) { s.Args = []string{"--broken"} })
	bad := currentHash(h)
	for i := 0; i < 5; i++ {
		if plan := step(h, bad, func(r *api.Replica) { r.State = api.ReplicaCrashed }); len(plan.Reverts) != 0 {
			t.Fatal("reverted with autoRevert false")
		}
	}
	if d := h.Memory.Deployments["web"]; d.State != api.DeployFailed {
		t.Fatalf("deployment: %+v", d)
	}
	for _, r := range h.Snap.Replicas {
		if r.SpecHash == bad {
			t.Errorf("failed replica %s kept", r.ID)
		}
	}
	if available(h) != 2 || currentHash(h) != bad {
		t.Fatalf("%d available; spec reverted: %v", available(h), currentHash(h) != bad)
	}
}

// Canaries start beside the old replicas and wait for promotion; once
// promoted (through memory, as the API leaves it), the rest rolls.
func TestCanaryWaitsForPromotion(t *testing.T) {
	h := serving(t, 4, func(s *api.ServiceSpec) { s.Update.Canary = 1 })
	change(h, func(s *api.ServiceSpec) { s.Env["V"] = "2" })
	hash := currentHash(h)
	for i := 0; i < 10; i++ {
		step(h, hash, nil)
	}
	d := h.Memory.Deployments["web"]
	if d.State != api.DeployWaitingPromotion || d.Updated != 1 || d.Old != 4 {
		t.Fatalf("canary phase: %+v", d)
	}
	if !hasEventIn(h.Events, "CanaryReady", "rollout promote web") {
		t.Fatal("no CanaryReady event")
	}
	h.Memory.Promotions["web"] = hash
	for i := 0; i < 60 && !deployed(h, hash); i++ {
		step(h, hash, nil)
		if available(h) < 4 {
			t.Fatal("fewer than 4 available after promotion")
		}
	}
	if d := h.Memory.Deployments["web"]; d.State != api.DeployComplete || len(h.Memory.Promotions) != 0 {
		t.Fatalf("after promotion: %+v", d)
	}
}

// A paused deployment holds where it is; resumed, it finishes.
func TestPausedDeploymentHolds(t *testing.T) {
	h := serving(t, 3)
	change(h, func(s *api.ServiceSpec) { s.Env["V"] = "2"; s.Update.Paused = true })
	hash := currentHash(h)
	for i := 0; i < 5; i++ {
		if plan := step(h, hash, nil); len(plan.CreateReplicas)+len(plan.DeleteReplicas) != 0 {
			t.Fatalf("a paused deployment changed replicas: %+v", plan)
		}
	}
	if d := h.Memory.Deployments["web"]; d.State != api.DeployPaused {
		t.Fatalf("deployment: %+v", d)
	}
	change(h, func(s *api.ServiceSpec) { s.Update.Paused = false })
	if currentHash(h) != hash {
		t.Fatal("pausing changed the revision")
	}
	for i := 0; i < 40 && !deployed(h, hash); i++ {
		step(h, hash, nil)
	}
	if d := h.Memory.Deployments["web"]; d.State != api.DeployComplete {
		t.Fatalf("after resume: %+v", d)
	}
}

// A server that takes over mid-deployment resumes it from the store's
// memory (encoded and decoded as the store keeps it).
func TestDeploymentResumesFromStoredMemory(t *testing.T) {
	h := serving(t, 4)
	change(h, func(s *api.ServiceSpec) { s.Env["V"] = "2" })
	hash := currentHash(h)
	for i := 0; i < 4; i++ {
		step(h, hash, nil)
	}
	if d := h.Memory.Deployments["web"]; d.State != api.DeployProgressing || d.Updated == 0 {
		t.Fatalf("not mid-deployment: %+v", d)
	}
	entries, err := h.Memory.Entries()
	if err != nil {
		t.Fatal(err)
	}
	if h.Memory, err = decide.DecodeMemory(entries); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40 && !deployed(h, hash); i++ {
		step(h, hash, nil)
		if len(h.Snap.Replicas) > 5 || available(h) < 4 {
			t.Fatalf("resumed deployment broke its bounds: %d replicas, %d available", len(h.Snap.Replicas), available(h))
		}
	}
	if d := h.Memory.Deployments["web"]; d.State != api.DeployComplete || d.Number != 2 {
		t.Fatalf("resumed deployment: %+v", d)
	}
}

// A Secret's new revision is a new revision of the services that use it;
// returning to an older spec takes the next number; history is bounded.
func TestRevisionsFollowSecretsAndHistory(t *testing.T) {
	h := serving(t, 1, func(s *api.ServiceSpec) {
		two := 2
		s.Update.RevisionHistory = &two
		s.SecretEnv = map[string]api.SecretKeyRef{"TOKEN": {Name: "db", Key: "token"}}
	})
	h.Snap.SecretRevisions = map[string]string{"db": "2"}
	for i := 0; i < 3; i++ {
		step(h, "", nil)
	}
	if d := h.Memory.Deployments["web"]; d.Number != 2 || d.State != api.DeployComplete {
		t.Fatalf("a Secret's change: %+v", d)
	}
	for _, v := range []string{"a", "b", "c", "d"} {
		change(h, func(s *api.ServiceSpec) { s.Env["V"] = v })
		for i := 0; i < 4; i++ {
			step(h, "", nil)
		}
	}
	if n := len(h.Memory.Revisions); n != 3 {
		t.Fatalf("%d revisions kept, want the current and 2 of history", n)
	}
	change(h, func(s *api.ServiceSpec) { s.Env["V"] = "c" })
	step(h, "", nil)
	if d := h.Memory.Deployments["web"]; d.Number != 7 {
		t.Fatalf("returning to an older revision: %+v", d)
	}
}

// deployed reports whether web's deployment of hash completed.
func deployed(h *decidetest.Harness, hash string) bool {
	d := h.Memory.Deployments["web"]
	return d.Revision == hash && d.State == api.DeployComplete
}

func hasEventIn(events []decide.Event, reason, text string) bool {
	for _, e := range events {
		if e.Reason == reason && strings.Contains(e.Message, text) {
			return true
		}
	}
	return false
}

// A first revision that fails has nothing to return to: its replicas
// stay (their runner keeps restarting them) rather than being replaced
// pass after pass.
func TestFailedFirstRevisionKeepsItsReplicas(t *testing.T) {
	h := decidetest.New(t)
	h.Cluster("c", decidetest.Group("g", "large", 1, 1))
	h.Machine("c", "g", "large")
	h.Service("web", "c", 2, "100m", "64Mi")
	hash := currentHash(h)
	for i := 0; i < 6; i++ {
		plan := step(h, hash, func(r *api.Replica) { r.State, r.Reason = api.ReplicaCrashed, "exit status 2" })
		if i > 0 && (len(plan.CreateReplicas) != 0 || len(plan.DeleteReplicas) != 0 || len(plan.Reverts) != 0) {
			t.Fatalf("pass %d churned: %d created, %d deleted, %d reverts", i, len(plan.CreateReplicas), len(plan.DeleteReplicas), len(plan.Reverts))
		}
	}
	if d := h.Memory.Deployments["web"]; d.State != api.DeployFailed || !strings.Contains(d.Reason, "exit status 2") {
		t.Fatalf("deployment: %+v", d)
	}
}

// A new replica that has not yet passed its health check while starting
// is no failure: it has until the progress deadline.
func TestStartingReplicaHasUntilTheDeadline(t *testing.T) {
	h := serving(t, 1, func(s *api.ServiceSpec) { s.Update.ProgressDeadlineSeconds = 60 })
	change(h, func(s *api.ServiceSpec) { s.Env["V"] = "2" })
	hash := currentHash(h)
	starting := func(r *api.Replica) { r.State, r.Health = api.ReplicaStarting, api.HealthUnhealthy }
	for i := 0; i < 10; i++ {
		step(h, hash, starting)
	}
	if d := h.Memory.Deployments["web"]; d.State != api.DeployProgressing {
		t.Fatalf("failed before the deadline: %+v", d)
	}
	good := h.Memory.Deployments["web"].Stable
	for i := 0; i < 6 && !deployed(h, good); i++ {
		step(h, hash, starting)
	}
	if !deployed(h, good) || !hasEventIn(h.Events, "DeploymentFailed", "replica web-0-r2 is starting") {
		t.Fatalf("after the deadline: %+v", h.Memory.Deployments["web"])
	}
}
