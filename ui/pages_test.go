package ui

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/gantry-dev/gantry/api"
)

// answering is a fake API that answers each path with its object, after
// the sign-in's read of the clusters.
func answering(t *testing.T, answers map[string]any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/clusters" {
			_ = json.NewEncoder(w).Encode(map[string]any{"items": []api.Cluster{}})
			return
		}
		answer, ok := answers[r.URL.Path]
		if !ok {
			t.Errorf("unexpected API call %s", r.URL)
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(answer)
	})
}

func getPage(t *testing.T, srv *httptest.Server, cookies []*http.Cookie, path string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
	}
	return string(body)
}

func wantAll(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(body, want) {
			t.Errorf("%s lacks %s", what, want)
		}
	}
}

// The topology page draws each machine as wide as its CPU against the
// largest, and inside it each replica placed there as wide as its share
// of the machine's CPU, colored by state, with the rest shown free.
func TestTopologyDrawsMachinesWithTheirReplicas(t *testing.T) {
	big, small := api.Resources{MilliCPU: 4000, MemoryBytes: 8 << 30}, api.Resources{MilliCPU: 1000, MemoryBytes: 2 << 30}
	srv, cookies := signedIn(t, answering(t, map[string]any{
		"/v1/machines": map[string]any{"items": []api.Machine{
			{ID: "m-big", Cluster: "east", Group: "general", InstanceType: "large", Allocatable: big},
			{ID: "m-small", Cluster: "east", Group: "general", InstanceType: "small", Allocatable: small, Cordoned: true}}},
		"/v1/replicas": map[string]any{"items": []api.Replica{
			{ID: "web-1", Service: "web", Index: 1, Machine: "m-big", State: api.ReplicaCrashed, Requests: api.Resources{MilliCPU: 1000}, Reason: "exit 3"},
			{ID: "web-0", Service: "web", Index: 0, Machine: "m-big", State: api.ReplicaRunning, Requests: api.Resources{MilliCPU: 2000}},
			{ID: "tiny-0", Service: "tiny", Machine: "m-small", State: api.ReplicaStarting},
			{ID: "web-2", Service: "web", Index: 2, State: api.ReplicaPending, Requests: api.Resources{MilliCPU: 1000}}}},
	}))
	body := getPage(t, srv, cookies, "/ui/topology")
	wantAll(t, "the topology page", body,
		`data-machine="m-big" data-state="/" style="width: 420px"`, `data-machine="m-small" data-state="/" style="width: 210px"`,
		`<a class="replica-box state-running" data-replica="web-0" href="/ui/replicas/web-0" style="width: 50%"`,
		`<a class="replica-box state-crashed" data-replica="web-1" href="/ui/replicas/web-1" style="width: 25%"`, "exit 3",
		`<span class="free" style="width: 25%">`,
		`<a class="replica-box state-starting" data-replica="tiny-0" href="/ui/replicas/tiny-0" style="width: 1%"`,
		`<em>cordoned</em>`, `href="/ui/topology?cluster=east"`)
	if strings.Index(body, `data-replica="web-0"`) > strings.Index(body, `data-replica="web-1"`) {
		t.Error("a machine's replicas are not in service and index order")
	}
	if strings.Contains(body, `data-replica="web-2"`) {
		t.Error("a pending replica is drawn inside a machine")
	}
}

// A service's page compares any two of its revisions, as `gantry rollout
// diff` does; by default the current one against the one before it.
func TestServicePageComparesTwoRevisions(t *testing.T) {
	revision := func(n int64, image string, replicas int) api.Revision {
		return api.Revision{Service: "web", Number: n, Hash: image, Spec: api.ServiceSpec{Cluster: "east", Image: image, Replicas: &replicas}}
	}
	srv, cookies := signedIn(t, answering(t, map[string]any{
		"/v1/services/web": api.Service{Metadata: api.ObjectMeta{Name: "web"}, Spec: api.ServiceSpec{Cluster: "east"},
			Status: &api.ServiceStatus{Revision: 3}},
		"/v1/services/web/rollout": api.Rollout{Deployment: &api.Deployment{Number: 3, Revision: "web:3", State: api.DeployComplete},
			Revisions: []api.Revision{revision(1, "web:1", 2), revision(2, "web:2", 2), revision(3, "web:3", 5)}},
		"/v1/replicas": map[string]any{"items": []api.Replica{}},
	}))
	first := getPage(t, srv, cookies, "/ui/services/web")
	wantAll(t, "the service page", first, `<option value="2" selected>2</option>`, `<option value="3" selected>3</option>`)
	if strings.Contains(first, `id="revision-diff"`) {
		t.Error("the service page compares revisions before it is asked")
	}
	diff := getPage(t, srv, cookies, "/ui/services/web?from=1&to=3")
	wantAll(t, "the comparison of 1 and 3", diff, `id="revision-diff"`, "From revision 1 to 3", "spec.image: &#34;web:1&#34; → &#34;web:3&#34;", "spec.replicas: 2 → 5",
		"gantry rollout diff web 1 3")
	wantAll(t, "a comparison with no revision 9", getPage(t, srv, cookies, "/ui/services/web?from=1&to=9"),
		`id="diff-error"`, "no revision 9 (the service has [1 2 3])")
}

// The charts page carries the server's samples as JSON for uPlot, and
// loads uPlot and the page's script.
func TestChartsPageCarriesTheSamples(t *testing.T) {
	at := testNow().Add(-time.Minute)
	srv, cookies := signedIn(t, answering(t, map[string]any{
		"/v1/history": api.History{Interval: "1m0s", Samples: []api.HistorySample{
			{At: at, PerHour: 1.5, LowerBoundPerHour: 1.25, Pending: 4, Heartbeats: 120, HeartbeatP99Seconds: 0.004},
			{At: at.Add(time.Minute), PerHour: 2}}},
	}))
	body := getPage(t, srv, cookies, "/ui/charts")
	wantAll(t, "the charts page", body, `<script src="/ui/static/uPlot.iife.min.js">`, `<script src="/ui/static/charts.js">`,
		`href="/ui/static/uPlot.min.css"`, `id="chart-cost"`, `id="chart-heartbeats"`, "every 1m0s: 2 samples since 2026-11-24 06:59:00 UTC")
	start := strings.Index(body, `<script type="application/json" id="history-data">`)
	end := strings.Index(body[start:], "</script>")
	if start < 0 || end < 0 {
		t.Fatalf("no samples in the page:\n%s", body)
	}
	var samples []api.HistorySample
	raw := body[start+len(`<script type="application/json" id="history-data">`) : start+end]
	if err := json.Unmarshal([]byte(raw), &samples); err != nil || len(samples) != 2 || samples[0].LowerBoundPerHour != 1.25 || samples[0].Pending != 4 {
		t.Fatalf("the page's samples %q: %+v %v", raw, samples, err)
	}
	for _, file := range []string{"uPlot.iife.min.js", "charts.js", "xterm.js", "addon-fit.js", "shell.js"} {
		resp, err := http.Get(srv.URL + "/ui/static/" + file)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("static %s: %v %v", file, resp, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
}

// The browser's terminal is the API's exec, opened with the session's
// token in place of its cookie; a refusal before the upgrade reaches the
// browser as the WebSocket's close reason; another site's page cannot
// open one.
func TestShellOpensTheAPIsExecWithTheSessionsToken(t *testing.T) {
	asked := make(chan *http.Request, 1)
	fake := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/clusters":
			_ = json.NewEncoder(w).Encode(map[string]any{"items": []api.Cluster{}})
		case "/v1/replicas/web-0/exec":
			asked <- r
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"error":{"code":"forbidden","message":"a read-only token may only read"}}`)
		default:
			http.NotFound(w, r)
		}
	})
	srv, cookies := signedIn(t, fake)
	wantAll(t, "the shell page", getPage(t, srv, cookies, "/ui/replicas/web-0/shell?command=bash"),
		`<script src="/ui/static/xterm.js">`, `<script src="/ui/static/shell.js">`, `data-replica="web-0"`, `value="bash"`)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	header := http.Header{"Cookie": {cookies[0].String()}}
	conn, _, err := websocket.Dial(ctx, srv.URL+"/ui/replicas/web-0/exec?command=sh&tty=true&stdin=true", &websocket.DialOptions{HTTPHeader: header})
	if err != nil {
		t.Fatalf("open the shell's WebSocket: %v", err)
	}
	defer conn.CloseNow()
	_, _, err = conn.Read(ctx)
	var closed websocket.CloseError
	if !errors.As(err, &closed) || closed.Code != websocket.StatusPolicyViolation || closed.Reason != "a read-only token may only read" {
		t.Fatalf("the refused shell ended with %v, want the API's refusal as its close reason", err)
	}
	r := <-asked
	if r.Header.Get("Authorization") != "Bearer good" || r.Header.Get("Cookie") != "" || strings.Join(r.URL.Query()["command"], " ") != "sh" || r.URL.Query().Get("tty") != "true" {
		t.Errorf("the API was asked with %v and %v", r.Header, r.URL.Query())
	}

	header.Set("Origin", "https://elsewhere.example")
	if _, resp, err := websocket.Dial(ctx, srv.URL+"/ui/replicas/web-0/exec?command=sh", &websocket.DialOptions{HTTPHeader: header}); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a shell opened from another site's page: %v %v, want 403", resp, err)
	}
	if _, resp, err := websocket.Dial(ctx, srv.URL+"/ui/replicas/web-0/exec?command=sh", nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a shell opened signed out: %v %v, want 401", resp, err)
	}
}
