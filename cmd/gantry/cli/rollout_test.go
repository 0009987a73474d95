package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
)

// `apply --wait` may first look after the revision it applied already
// failed and the service was reverted: it still reports the failure.
func TestFollowerSeesARevertItMissed(t *testing.T) {
	ro := api.Rollout{
		Deployment: &api.Deployment{Service: "web", Generation: 3, Revision: "good", Number: 3, State: api.DeployComplete, Desired: 3, Updated: 3, Available: 3},
		Revisions: []api.Revision{
			{Service: "web", Number: 2, Hash: "bad", Generation: 2, Failed: "replica web-0-r2 crashed"},
			{Service: "web", Number: 3, Hash: "good", Generation: 3, Cause: "revert of revision 2"},
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(ro)
	}))
	defer srv.Close()
	var out bytes.Buffer
	g := &globals{out: &out}
	f := &follower{g: g, c: client.New(srv.URL, "t", srv.Client()), service: "web", generation: 2, reverts: true}
	done, err := f.step(context.Background())
	if !done || err == nil || !strings.Contains(err.Error(), "revision 2 failed: replica web-0-r2 crashed; the service is back on revision 3") {
		t.Fatalf("done %v, err %v; printed %s", done, err, out.String())
	}

	// The generation's own revision completing is success.
	f = &follower{g: g, c: client.New(srv.URL, "t", srv.Client()), service: "web", generation: 3, reverts: true}
	if done, err := f.step(context.Background()); !done || err != nil {
		t.Fatalf("the current revision: done %v, err %v", done, err)
	}
}

// The follow prints why the revision's replicas do not serve as soon as
// it is known, once per reason, and fails at once on a replica no
// machine will ever hold.
func TestFollowerSaysWhyAtOnceAndFailsFastWhenNothingCanHold(t *testing.T) {
	ro := api.Rollout{Deployment: &api.Deployment{Service: "web", Generation: 2, Revision: "r2", Number: 2, State: api.DeployProgressing, Desired: 2}}
	replicas := []api.Replica{
		{ID: "web-0", Service: "web", SpecHash: "r2", State: api.ReplicaCrashed, Restarts: 3, Reason: "exited: exit status 1"},
		{ID: "web-1", Service: "web", SpecHash: "r1", State: api.ReplicaPending, Reason: "old revision: not printed"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/replicas" {
			_ = json.NewEncoder(w).Encode(map[string]any{"items": replicas})
			return
		}
		_ = json.NewEncoder(w).Encode(ro)
	}))
	defer srv.Close()
	var out bytes.Buffer
	f := &follower{g: &globals{out: &out}, c: client.New(srv.URL, "t", srv.Client()), service: "web", generation: 2}
	for range 2 {
		if done, err := f.step(context.Background()); done || err != nil {
			t.Fatalf("a crashing replica: done %v, err %v", done, err)
		}
	}
	if strings.Count(out.String(), "replica/web-0 crashed (restarts 3): exited: exit status 1") != 1 || strings.Contains(out.String(), "web-1") {
		t.Fatalf("printed:\n%s\nwant web-0's crash once, nothing of the old revision", out.String())
	}
	replicas = append(replicas, api.Replica{ID: "web-2", Service: "web", SpecHash: "r2", State: api.ReplicaPending,
		Reason: api.ReasonUnschedulable + "0/1 machines fit: 1 labels do not match nodeSelector; no machine can be added: group g: labels do not match nodeSelector"})
	done, err := f.step(context.Background())
	if !done || err == nil || !strings.Contains(err.Error(), "replica web-2 can never be placed as the spec stands: 0/1 machines fit") {
		t.Fatalf("an unschedulable replica: done %v, err %v", done, err)
	}
}
