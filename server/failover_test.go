package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
)

const testGroup = `kind: FailoverGroup
metadata: {name: kv}
spec:
  primary: {cluster: dev}
  replica: {cluster: other}
  capability: {name: generic, generic: {promote: [touch, promoted]}}
  template:
    command: [sh, -c, "exec sleep 300"]
    ports: [{name: kv}]
    resources: {cpu: 100m, memory: 64Mi}
  leaseSeconds: 8
`

// A group is stored with its two services; the services change only
// through the group; an agent running a member is told its role with its
// assignment and heartbeats a quarter of a lease apart; deleting the
// group deletes its services.
func TestFailoverGroupThroughTheAPI(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	res, err := ts.admin.Apply(ctx, []byte(testGroup))
	if err != nil {
		t.Fatal(err)
	}
	var applied []string
	for _, it := range res.Results {
		applied = append(applied, it.Kind+"/"+it.Name+" "+it.Action)
	}
	if got := strings.Join(applied, ", "); got != "FailoverGroup/kv created, Service/kv-dev created, Service/kv-other created" {
		t.Fatalf("apply: %s", got)
	}
	svc, err := ts.admin.GetService(ctx, "kv-dev")
	if err != nil || svc.Spec.Failover == nil || svc.Spec.Failover.Group != "kv" {
		t.Fatalf("member service: %+v %v", svc, err)
	}
	plain := "kind: Service\nmetadata: {name: kv-dev}\nspec: {cluster: dev, command: [sleep, \"300\"]}\n"
	if _, err := ts.admin.Apply(ctx, []byte(plain)); !client.IsStatus(err, http.StatusConflict) || !strings.Contains(err.Error(), "change or delete the group") {
		t.Fatalf("a plain apply over a member service: %v", err)
	}
	err = ts.admin.DeleteService(ctx, "kv-dev")
	if !client.IsStatus(err, http.StatusConflict) || !strings.Contains(err.Error(), `belongs to failover group "kv"`) {
		t.Fatalf("deleting a member service: %v", err)
	}
	err = ts.admin.RequestFailover(ctx, "kv", api.FailoverRevert)
	if !client.IsStatus(err, http.StatusConflict) {
		t.Fatalf("revert of an initialising group: %v", err)
	}
	if err := ts.admin.RequestFailover(ctx, "nope", api.FailoverPromote); !client.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("promote of a missing group: %v", err)
	}

	credential := ts.joinManual(t, "dev", "m1")
	agent := client.New(ts.URL(), credential, ts.http)
	var resp *api.HeartbeatResponse
	waitFor(t, 10*time.Second, "the member assigned with its role", func() bool {
		resp, err = agent.Heartbeat(ctx, "m1", api.HeartbeatRequest{})
		return err == nil && len(resp.Assignments) == 1 && resp.Assignments[0].Failover != nil && resp.Assignments[0].Failover.Role == api.RolePrimary
	})
	f := resp.Assignments[0].Failover
	if f.Group != "kv" || f.Epoch != 1 || !f.Bootstrap || f.LeaseSeconds != 8 || f.Capability.Name != api.CapabilityGeneric {
		t.Fatalf("role: %+v", f)
	}
	if resp.HeartbeatInterval != "2s" {
		t.Fatalf("a member's machine heartbeats a quarter of a lease apart, told %s", resp.HeartbeatInterval)
	}
	g, err := ts.admin.GetFailoverGroup(ctx, "kv")
	if err != nil || g.Status.Phase != "Initializing" || len(g.Status.Members) != 2 || g.Status.Members[0].Role != api.RolePrimary || g.Status.Members[0].Machine != "m1" {
		t.Fatalf("group status: %+v %v", g.Status, err)
	}

	if err := ts.admin.DeleteFailoverGroup(ctx, "kv"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kv-dev", "kv-other"} {
		if _, err := ts.admin.GetService(context.Background(), name); !client.IsStatus(err, http.StatusNotFound) {
			t.Fatalf("%s after the group's deletion: %v", name, err)
		}
	}
	if _, err := ts.admin.GetFailoverGroup(ctx, "kv"); !client.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("group after deletion: %v", errors.Unwrap(err))
	}
}
