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

// failover --wait says once why each member does not serve yet, and
// fails at once when a member's replica can never be placed.
func TestFailoverWaitSaysWhyMembersWait(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reason := "waiting for machine east-db-1 to join"
		if r.URL.Path == "/v1/replicas/pg-west-0" {
			reason = api.ReasonUnschedulable + "0/2 machines fit: 2 labels do not match nodeSelector"
		}
		_ = json.NewEncoder(w).Encode(api.Replica{ID: strings.TrimPrefix(r.URL.Path, "/v1/replicas/"), State: api.ReplicaPending, Reason: reason})
	}))
	defer srv.Close()
	c := client.New(srv.URL, "t", srv.Client())
	var out bytes.Buffer
	said := memberReasons{}
	healthy := []api.FailoverMember{{Cluster: "east", Role: api.RolePrimary, Replica: "pg-east-0", State: string(api.ReplicaRunning), Health: api.HealthHealthy}}
	if err := said.say(context.Background(), &out, c, "pg", healthy); err != nil || out.Len() != 0 {
		t.Fatalf("a serving member: %v %q", err, out.String())
	}
	waiting := []api.FailoverMember{{Cluster: "east", Role: api.RoleReplica, Replica: "pg-east-0", State: string(api.ReplicaStarting), Message: "waiting for the primary's address"}}
	for range 2 {
		if err := said.say(context.Background(), &out, c, "pg", waiting); err != nil {
			t.Fatal(err)
		}
	}
	if got := out.String(); got != "  member east (replica): starting: waiting for the primary's address\n" {
		t.Fatalf("a waiting member, twice: %q", got)
	}
	unplaceable := []api.FailoverMember{{Cluster: "west", Role: api.RoleReplica, Replica: "pg-west-0", State: string(api.ReplicaPending)}}
	err := said.say(context.Background(), &out, c, "pg", unplaceable)
	if err == nil || !strings.Contains(err.Error(), "the replica of cluster west can never be placed as the spec stands: 0/2 machines fit") {
		t.Fatalf("an unplaceable member: %v", err)
	}
}
