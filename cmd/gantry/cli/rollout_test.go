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
