package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
)

// `gantry rollout diff` prints what changed between two revisions (the
// second defaulting to the current one) and names a bad revision.
func TestRolloutDiffPrintsTheChangedFields(t *testing.T) {
	replicas := func(n int) *int { return &n }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/services/web/rollout" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(api.Rollout{Deployment: &api.Deployment{Number: 3},
			Revisions: []api.Revision{
				{Number: 1, Spec: api.ServiceSpec{Image: "web:1", Replicas: replicas(2)}},
				{Number: 3, Spec: api.ServiceSpec{Image: "web:3", Replicas: replicas(2)}}}})
	}))
	t.Cleanup(srv.Close)
	out, errOut, code := run(srv, "rollout", "diff", "web", "1")
	if code != 0 || strings.TrimSpace(out) != `spec.image: "web:1" → "web:3"` {
		t.Errorf("rollout diff web 1: %d %q %q", code, out, errOut)
	}
	if out, _, code := run(srv, "rollout", "diff", "web", "3", "3"); code != 0 || !strings.Contains(out, "the same") {
		t.Errorf("rollout diff web 3 3: %d %q", code, out)
	}
	for args, want := range map[string]string{
		"web x":   `revision "x": want a revision number`,
		"web 1 9": "service web: no revision 9 (the service has [1 3])",
	} {
		if _, errOut, code := run(srv, append([]string{"rollout", "diff"}, strings.Fields(args)...)...); code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("rollout diff %s: %d %q, want %q", args, code, errOut, want)
		}
	}
}
