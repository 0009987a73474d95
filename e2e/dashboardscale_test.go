package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	neturl "net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/internal/browser"
	gantryserver "github.com/gantry-dev/gantry/server"
	"github.com/gantry-dev/gantry/store"
)

// TestDashboardAtScale loads the machines and replicas pages of a fleet of
// 1,000 machines and 10,000 replicas in Chromium and keeps how long each
// took to load (an artifact, not an assertion). The server runs in
// process so that the test can write the fleet into its store.
func TestDashboardAtScale(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	if testing.Short() {
		t.Skip("fills a store with 11,000 rows")
	}
	tab := browser.New(t)
	url, token, st := inProcessServer(t)
	filled := time.Now()
	fillFleet(t, st, 1000, 10)
	t.Logf("stored 1,000 machines and 10,000 replicas in %s", time.Since(filled).Round(time.Millisecond))
	run(t, tab, "sign in", chromedp.Navigate(url+"/ui/login"), chromedp.WaitVisible("#token"),
		chromedp.SendKeys("#token", token), chromedp.Submit("#token"), chromedp.WaitVisible("main#view"))
	times := map[string]float64{}
	for _, p := range []struct{ path, rows, shows string }{
		{"/ui/machines", `tr[data-machine]`, "1–100 of 1000"},
		{"/ui/replicas", `tr[data-replica]`, "1–100 of 10000"},
		{"/ui/replicas?page=57", `tr[data-replica]`, "5601–5700 of 10000"},
	} {
		run(t, tab, p.path, chromedp.Navigate(url+p.path), chromedp.WaitVisible(`main#view .pager`))
		// Rows and pager in one evaluation: the live view swaps main#view's
		// content, and a pager read apart from the rows once found the
		// node being replaced (its text "").
		shown := value(t, tab, p.path+" rows and pager", chromedp.Evaluate[struct {
			Rows  int    `json:"rows"`
			Pager string `json:"pager"`
		}](`(() => ({rows: document.querySelectorAll('`+p.rows+`').length, pager: document.querySelector('main#view .pager')?.textContent ?? ""}))()`))
		rows, pager := shown.Rows, shown.Pager
		ms := value(t, tab, p.path+" load time", chromedp.Evaluate[float64](
			`(() => { const n = performance.getEntriesByType("navigation")[0]; return n.domContentLoadedEventEnd - n.startTime })()`))
		if rows != 100 || !strings.Contains(pager, p.shows) {
			t.Fatalf("%s: %d rows, pager %q; want 100 rows and %q", p.path, rows, pager, p.shows)
		}
		times[p.path] = ms
		t.Logf("%s loaded in %.0f ms (navigation start to DOMContentLoaded)", p.path, ms)
	}
	out, _ := json.MarshalIndent(map[string]any{"machines": 1000, "replicas": 10000, "loadMillis": times}, "", "  ")
	browser.Keep(t, "dashboard-load-times.json", out)
}

// inProcessServer runs a plain-HTTP server in this process with a cluster
// "dev" and no control-loop pass after the first; it returns its URL, its
// admin token and its store.
func inProcessServer(t testing.TB) (string, string, store.Store) {
	t.Helper()
	var st store.Store
	cfg := gantryserver.DefaultConfig(t.TempDir())
	cfg.Listen, cfg.TLS.Disabled, cfg.Controller.Interval = "127.0.0.1:0", true, time.Hour
	cfg.WrapStore = func(s store.Store) store.Store { st = s; return s }
	srv, err := gantryserver.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	<-srv.Ready()
	spec := "kind: Cluster\nmetadata: {name: dev}\nspec:\n  capacityGroups:\n    - {groupId: general, instanceType: local.small, minSize: 0, maxSize: 3}\n"
	if _, err := client.New(srv.URL(), srv.AdminToken(), nil).Apply(ctx, []byte(spec)); err != nil {
		t.Fatal(err)
	}
	return srv.URL(), srv.AdminToken(), st
}

// fillFleet writes machines joined machines to cluster dev, each running
// perMachine replicas of one of ten services.
func fillFleet(t testing.TB, st store.Store, machines, perMachine int) {
	t.Helper()
	now := time.Now()
	err := st.Update(context.Background(), func(tx store.Tx) error {
		for i := range machines {
			m := &api.Machine{ID: fmt.Sprintf("m-%04d", i), Cluster: "dev", Group: "general", InstanceType: "local.small", Zone: "local-a",
				CapacityType: "onDemand", Provider: "local", LaunchKey: fmt.Sprintf("k-%d", i), JoinState: api.JoinJoined, FleetState: api.FleetActive,
				Capacity: api.Resources{MilliCPU: 16000, MemoryBytes: 64 << 30}, PricePerHour: 0.5, CreatedAt: now, JoinedAt: &now, LastHeartbeat: &now, StateChangedAt: now}
			if err := tx.CreateMachine(m); err != nil {
				return err
			}
			for j := range perMachine {
				n := i*perMachine + j
				r := &api.Replica{ID: fmt.Sprintf("svc%d-%d", n%10, n/10), Service: fmt.Sprintf("svc%d", n%10), Cluster: "dev", Index: n / 10,
					Machine: m.ID, State: api.ReplicaRunning, Health: api.HealthHealthy, SpecHash: "h", Requests: api.Resources{MilliCPU: 500, MemoryBytes: 1 << 30}, UpdatedAt: now}
				if err := tx.PutReplica(r); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkDashboardReplicasPage renders the 50th page of the replicas
// view of a fleet of 1,000 machines and 10,000 replicas, through the whole
// handler (session, API call in process, template):
//
//	go test -run '^$' -bench DashboardReplicasPage -count 3 ./e2e
func BenchmarkDashboardReplicasPage(b *testing.B) {
	url, token, st := inProcessServer(b)
	fillFleet(b, st, 1000, 10)
	hc := signedIn(b, url, token)
	for b.Loop() {
		getPage(b, hc, url+"/ui/replicas?page=50")
	}
}

// BenchmarkListReplicasFirstPage reads the first page (500, kubectl's
// chunk) of the replicas of a fleet of 50,000 machines and 500,000
// replicas through the API, and for comparison the page after the
// 250,000th; then the dashboard's replicas view, its first and 50th page:
//
//	go test -run '^$' -bench ListReplicasFirstPage -benchtime 20x -count 3 ./e2e
func BenchmarkListReplicasFirstPage(b *testing.B) {
	url, token, st := inProcessServer(b)
	fillFleet(b, st, 50000, 10)
	c := client.New(url, token, nil)
	var middle string
	b.Run("first", func(b *testing.B) {
		for b.Loop() {
			page, err := c.ListReplicasPage(context.Background(), client.ReplicaQuery{}, 500, "")
			if err != nil || len(page.Items) != 500 || page.Metadata.Continue == "" {
				b.Fatalf("first page: %d replicas, %v", len(page.Items), err)
			}
		}
	})
	cont := ""
	for range 500 {
		page, err := c.ListReplicasPage(context.Background(), client.ReplicaQuery{}, 500, cont)
		if err != nil {
			b.Fatal(err)
		}
		cont = page.Metadata.Continue
	}
	middle = cont
	b.Run("middle", func(b *testing.B) {
		for b.Loop() {
			page, err := c.ListReplicasPage(context.Background(), client.ReplicaQuery{}, 500, middle)
			if err != nil || len(page.Items) != 500 {
				b.Fatalf("middle page: %d replicas, %v", len(page.Items), err)
			}
		}
	})
	hc := signedIn(b, url, token)
	for _, page := range []string{"1", "50"} {
		b.Run("dashboard/page="+page, func(b *testing.B) {
			for b.Loop() {
				getPage(b, hc, url+"/ui/replicas?page="+page)
			}
		})
	}
	for _, page := range []string{"1", "250"} {
		b.Run("dashboard/machines/page="+page, func(b *testing.B) {
			for b.Loop() {
				getPage(b, hc, url+"/ui/machines?page="+page)
			}
		})
	}
}

// signedIn is an HTTP client signed in to the dashboard.
func signedIn(b *testing.B, url, token string) *http.Client {
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	if resp, err := hc.PostForm(url+"/ui/login", neturl.Values{"token": {token}}); err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("sign in: %v", err)
	}
	return hc
}

// getPage reads a dashboard page whole.
func getPage(b *testing.B, hc *http.Client, url string) {
	resp, err := hc.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("%s: status %d", url, resp.StatusCode)
	}
}

// `gantry get replicas` reads the fleet --chunk-size at a time (kubectl's
// habit: no answer holds the whole fleet), and lists every replica once,
// in order, whatever the chunk.
func TestGetReadsReplicasInChunks(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	url, token, st := inProcessServer(t)
	fillFleet(t, st, 3, 10)
	whole := ""
	for _, chunk := range []string{"0", "7", "30", "500"} {
		before := apiRequests(t, url, "GET /v1/replicas")
		out, errOut, code := runGantry(t, "--server", url, "--token", token, "get", "replicas", "--chunk-size", chunk, "-o", "name")
		if code != 0 {
			t.Fatalf("--chunk-size %s: exit %d %s", chunk, code, errOut)
		}
		if n := strings.Count(out, "\n"); n != 30 {
			t.Fatalf("--chunk-size %s: %d replicas, want 30:\n%s", chunk, n, out)
		}
		if whole == "" {
			whole = out
		} else if out != whole {
			t.Fatalf("--chunk-size %s lists otherwise than one request:\n%s\nwant:\n%s", chunk, out, whole)
		}
		want := map[string]float64{"0": 1, "7": 5, "30": 2, "500": 1}[chunk]
		if got := apiRequests(t, url, "GET /v1/replicas") - before; got != want {
			t.Errorf("--chunk-size %s: %v requests, want %v", chunk, got, want)
		}
	}
	if _, errOut, code := runGantry(t, "--server", url, "--token", token, "get", "replicas", "--chunk-size", "-1"); code == 0 || !strings.Contains(errOut, "--chunk-size") {
		t.Fatalf("--chunk-size -1: exit %d %s, want an error naming the flag", code, errOut)
	}
}

// apiRequests is how many requests of a route the server answered 200.
func apiRequests(t *testing.T, url, route string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	prefix := `gantry_api_requests_total{code="200",route="` + route + `"} `
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return n
		}
	}
	return 0
}
