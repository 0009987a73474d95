package ui

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// testNow is the dashboard's clock in these tests.
func testNow() time.Time { return time.Date(2026, 11, 24, 7, 0, 0, 0, time.UTC) }

// fakeAPI answers the reads the pages make with fixed objects, and
// refuses every token but "good".
func fakeAPI(t *testing.T) http.Handler {
	failedOver := testNow().Add(-time.Hour)
	answers := map[string]any{
		"/v1/clusters": map[string]any{"items": []api.Cluster{{Metadata: api.ObjectMeta{Name: "east"},
			Spec: api.ClusterSpec{CapacityGroups: []api.CapacityGroup{{GroupID: "general", MinSize: 1, MaxSize: 7}}},
			Status: &api.ClusterStatus{Groups: []api.GroupStatus{{GroupID: "general", Desired: 3, Current: 3, Joined: 2, Updated: 3}},
				Conditions: []api.Condition{{Type: api.ConditionProviderReady, Status: "False", Message: "credentials refused"}}}}}},
		"/v1/services": map[string]any{"items": []api.Service{{Metadata: api.ObjectMeta{Name: "web"}, Spec: api.ServiceSpec{Cluster: "east"}}}},
		"/v1/replicas/web-0": api.Replica{ID: "web-0", Service: "web", Cluster: "east", Machine: "m-1", State: api.ReplicaRunning,
			Address: "10.0.0.5", HostPorts: map[string]int{"admin": 9000, "http": 8080}},
		"/v1/replicas/web-0/logs": "serving on :8080\n",
		"/v1/machines": map[string]any{"items": []api.Machine{{ID: "m-1", Cluster: "east", Group: "general", PricePerHour: 0.25,
			Allocatable: api.Resources{MilliCPU: 2000, MemoryBytes: 4 << 30}, Allocated: api.Resources{MilliCPU: 1500, MemoryBytes: 1 << 30}}}},
		"/v1/failovergroups": map[string]any{"items": []api.FailoverGroup{{Metadata: api.ObjectMeta{Name: "db"}, Status: &api.FailoverGroupInfo{
			Phase: "Healthy", Epoch: 4, Primary: "west", LastFailover: &failedOver,
			Members: []api.FailoverMember{{Cluster: "west", Home: "west", Role: "primary", Serving: true}, {Cluster: "east", Home: "east", Role: "replica"}}}}}},
		"/v1/events": map[string]any{"items": []api.Event{
			{ID: 1, Type: "Normal", Reason: "Launched", ObjectKind: "Machine", ObjectName: "m-1", Message: "up"},
			{ID: 2, Type: "Warning", Reason: "LaunchFailed", ObjectKind: "Machine", ObjectName: "m-2", Message: "no capacity"}}},
		"/v1/cost": api.CostReport{PerHour: 0.5, PlanPerHour: 0.4, LowerBoundPerHour: 0.25, Gap: 1, PlanGap: 0.6, IdlePerHour: 0.125,
			Services: []api.ServiceCost{{Service: "web", Cluster: "east", Replicas: 3, PerHour: 0.375}},
			Clusters: []api.ClusterCost{{Name: "east", PerHour: 0.5, Groups: []api.GroupCost{{Group: "general", Machines: 2, PerHour: 0.5}}}}},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"code":"unauthorized","message":"invalid token"}}`)
			return
		}
		answer, ok := answers[r.URL.Path]
		if !ok {
			t.Errorf("unexpected API call %s", r.URL)
			http.NotFound(w, r)
			return
		}
		if text, isText := answer.(string); isText {
			if r.URL.Query().Get("previous") == "true" {
				w.WriteHeader(http.StatusNotFound)
				_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"replica web-0 has no previous instance"}}`)
				return
			}
			_, _ = io.WriteString(w, text)
			return
		}
		_ = json.NewEncoder(w).Encode(answer)
	})
}

// signedIn serves a dashboard over api, closed with the test, and signs
// in to it with the token "good": the session's cookies.
func signedIn(t *testing.T, api http.Handler) (*httptest.Server, []*http.Cookie) {
	t.Helper()
	d, err := New(DefaultConfig(), api, testNow, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d.Handler())
	t.Cleanup(srv.Close)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(srv.URL+"/ui/login", url.Values{"token": {"good"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return srv, resp.Cookies()
}

func TestPagesRenderWhatTheAPIAnswers(t *testing.T) {
	srv, cookie := signedIn(t, fakeAPI(t))
	if len(cookie) != 1 {
		t.Fatalf("no session cookie: %v", cookie)
	}
	for path, wants := range map[string][]string{
		"/ui/": {`data-cluster="east"`, `<td class="joined">2</td>`, `<td class="min">1</td><td class="max">7</td>`,
			`<a href="/ui/services/web">web</a>`, `<span class="condition False"`, "credentials refused"},
		"/ui/machines":               {`data-machine="m-1"`, `style="width: 75%"`, "1.5/2"},
		"/ui/failover":               {`data-group="db"`, "epoch 4", `<td class="role">primary</td>`, `<td class="role">replica</td>`, "1h ago"},
		"/ui/events?type=Warning":    {"LaunchFailed", "no capacity"},
		"/ui/events?reason=launched": {"Launched"},
		"/ui/cost": {"$0.500/h", "$0.250/h", `<strong id="gap">100.0%</strong>`, `<tr data-service="web">`, "$0.375", `style="width: 75%"`,
			`<tr class="idle" id="idle">`, "$0.125"},
		"/ui/events?kind=Machine&name=": {"LaunchFailed", "Launched", `<a href="/ui/replicas?machine=m-2">Machine/m-2</a>`},
		"/ui/replicas/web-0": {`<a href="/ui/services/web">web</a>`, "serving on :8080", `id="replica-url" href="http://10.0.0.5:8080"`,
			`href="/ui/replicas?machine=m-1"`, `href="?previous=1"`, "gantry logs web-0"},
		"/ui/replicas/web-0?previous=1": {"replica web-0 has no previous instance", `href="?"`},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.AddCookie(cookie[0])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		for _, want := range wants {
			if !strings.Contains(string(body), want) {
				t.Errorf("%s lacks %s", path, want)
			}
		}
	}
	// the type filter keeps only warnings
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/events?type=Warning", nil)
	req.AddCookie(cookie[0])
	resp, _ := http.DefaultClient.Do(req)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), `data-event="1"`) {
		t.Error("the Warning filter shows a Normal event")
	}
}

func TestLoginRefusesAndUnknownPages(t *testing.T) {
	d, err := New(DefaultConfig(), fakeAPI(t), testNow, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	for token, want := range map[string]int{"": http.StatusBadRequest, "bad": http.StatusUnauthorized} {
		resp, err := http.PostForm(srv.URL+"/ui/login", url.Values{"token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || !strings.Contains(string(body), "token:") || len(resp.Cookies()) != 0 {
			t.Errorf("token %q: %d, cookies %v; want %d naming the token field", token, resp.StatusCode, resp.Cookies(), want)
		}
	}
	if _, err := New(Config{}, fakeAPI(t), time.Now, slog.Default()); err == nil {
		t.Error("a zero config was accepted")
	}
}

// The machines page asks the API for the page it shows only (a limit and
// an offset) and numbers it from the count the API gives.
func TestMachinesPageReadsOnlyThePageShown(t *testing.T) {
	asked := make(chan url.Values, 1)
	fake := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/clusters": // the sign-in's check of the token
			_ = json.NewEncoder(w).Encode(map[string]any{"items": []api.Cluster{}})
			return
		case "/v1/machines":
		default:
			http.NotFound(w, r)
			return
		}
		select {
		case asked <- r.URL.Query():
		default:
		}
		left := int64(697)
		_ = json.NewEncoder(w).Encode(map[string]any{"metadata": map[string]any{"remainingItemCount": left},
			"items": []api.Machine{{ID: "m-201", Cluster: "east", Group: "general"}}})
	})
	srv, cookies := signedIn(t, fake)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/machines?page=3", nil)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	size := DefaultConfig().PageSize
	var q url.Values
	select {
	case q = <-asked: // asked before the page was answered
	default:
		t.Fatalf("the machines page did not ask the API: %d %s", resp.StatusCode, body)
	}
	if q.Get("limit") != strconv.Itoa(size) || q.Get("offset") != strconv.Itoa(2*size) {
		t.Fatalf("the page asked the API for %v, want limit %d and offset %d", q, size, 2*size)
	}
	if !strings.Contains(string(body), `data-machine="m-201"`) || !strings.Contains(string(body), fmt.Sprintf("of %d", 2*size+1+697)) {
		t.Fatalf("page 3 of the machines: %s", body)
	}
}

// The events page shows PageSize events at a time, newest first, with
// links to the pages beside it.
func TestEventsPageIsPaged(t *testing.T) {
	var events []api.Event
	for i := 1; i <= 250; i++ {
		events = append(events, api.Event{ID: int64(i), Type: "Normal", Reason: "Launched", ObjectKind: "Machine", ObjectName: fmt.Sprintf("m-%d", i)})
	}
	fake := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/clusters":
			_ = json.NewEncoder(w).Encode(map[string]any{"items": []api.Cluster{}})
		case "/v1/events":
			_ = json.NewEncoder(w).Encode(map[string]any{"items": events})
		default:
			http.NotFound(w, r)
		}
	})
	srv, cookies := signedIn(t, fake)
	first := getPage(t, srv, cookies, "/ui/events")
	if n := strings.Count(first, "<tr data-event="); n != 100 || !strings.Contains(first, "1–100 of 250") ||
		!strings.Contains(first, `data-event="250"`) || strings.Contains(first, `data-event="150"`) {
		t.Fatalf("page 1 shows %d events:\n%s", n, first)
	}
	last := getPage(t, srv, cookies, "/ui/events?page=3")
	if n := strings.Count(last, "<tr data-event="); n != 50 || !strings.Contains(last, `data-event="1"`) || !strings.Contains(last, `rel="prev"`) {
		t.Fatalf("page 3 shows %d events:\n%s", n, last)
	}
}
