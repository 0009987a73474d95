package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
)

// signedIn returns a client holding a dashboard session signed in with token.
func (ts *testServer) signedIn(t testing.TB, token string) (*http.Client, *http.Response) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Transport: ts.http.Transport, Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.PostForm(ts.URL()+"/ui/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return hc, resp
}

func TestDashboardSignIn(t *testing.T) {
	ts, ctx := withTestCluster(t, nil)
	credential := ts.joinManual(t, "dev", "machine-a")
	readOnly, err := ts.admin.CreateToken(ctx, api.TokenRequest{Kind: api.TokenReadOnly})
	if err != nil {
		t.Fatal(err)
	}

	anon := &http.Client{Transport: ts.http.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/", "/dashboard", "/ui/", "/ui/machines"} {
		resp, err := anon.Get(ts.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); resp.StatusCode/100 != 3 || (loc != "/ui/" && loc != "/ui/login") {
			t.Errorf("GET %s signed out: %d to %q, want a redirect to the dashboard's sign-in", path, resp.StatusCode, loc)
		}
	}
	for name, token := range map[string]string{"a machine credential": credential, "a made-up token": "gantry_nope"} {
		if _, resp := ts.signedIn(t, token); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
			t.Errorf("sign-in with %s: %d, cookies %v; want 401 and no session", name, resp.StatusCode, resp.Cookies())
		}
	}

	hc, resp := ts.signedIn(t, readOnly.Secret)
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("read-only sign-in: %d, cookies %v", resp.StatusCode, cookies)
	}
	if c := cookies[0]; !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteStrictMode || strings.Contains(c.Value, readOnly.Secret) {
		t.Fatalf("session cookie %+v: want HttpOnly, Secure, SameSite=Strict, and no token in it", c)
	}
	page := getPage(t, hc, ts.URL()+"/ui/machines")
	if !strings.Contains(page, `data-machine="machine-a"`) || strings.Contains(page, readOnly.Secret) {
		t.Fatalf("machines page: want machine-a and never the token:\n%s", page)
	}
	if resp, err := hc.PostForm(ts.URL()+"/ui/logout", nil); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %v", err)
	}
	if resp, err := hc.Get(ts.URL() + "/ui/machines"); err != nil || resp.Header.Get("Location") != "/ui/login" {
		t.Fatalf("after sign-out the dashboard still answers: %v", err)
	}
}

// TestDashboardStreamSendsChanges reads a page's event stream: the body
// first, then a new body once the machine is cordoned.
func TestDashboardStreamSendsChanges(t *testing.T) {
	ts, ctx := withTestCluster(t, func(c *Config) { c.UI.LiveInterval = 50 * time.Millisecond })
	ts.joinManual(t, "dev", "machine-a")
	hc, _ := ts.signedIn(t, ts.AdminToken())
	streamCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(streamCtx, http.MethodGet, ts.URL()+"/ui/stream?view="+url.QueryEscape("/ui/machines?cluster=dev"), nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, ct)
	}
	events := readEvents(resp.Body)
	first := <-events
	if !strings.Contains(first, `data-machine="machine-a"`) || strings.Contains(first, "cordoned") {
		t.Fatalf("first body: %s", first)
	}
	if _, err := ts.admin.Cordon(ctx, "machine-a", true); err != nil {
		t.Fatal(err)
	}
	for body := range events {
		if strings.Contains(body, "<em>cordoned</em>") {
			return
		}
	}
	t.Fatal("the stream ended without showing the cordon")
}

// readEvents yields the data of each "view" event.
func readEvents(r io.Reader) <-chan string {
	out := make(chan string)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		var data strings.Builder
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "data: "); ok {
				data.WriteString(rest + "\n")
			} else if line == "" && data.Len() > 0 {
				out <- data.String()
				data.Reset()
			}
		}
	}()
	return out
}

func getPage(t *testing.T, hc *http.Client, u string) string {
	t.Helper()
	resp, err := hc.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, body)
	}
	return string(body)
}

// fillFleet writes machines joined machines to cluster dev, each running
// perMachine replicas of one of ten services.
func fillFleet(t testing.TB, ts *testServer, machines, perMachine int) {
	t.Helper()
	now := time.Now()
	err := ts.store.Update(context.Background(), func(tx store.Tx) error {
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
	// No process runs them: mark them gone before the server's cleanup
	// would terminate each through the local provider.
	t.Cleanup(func() {
		_ = ts.store.Update(context.Background(), func(tx store.Tx) error {
			for i := range machines {
				m, err := tx.GetMachine(fmt.Sprintf("m-%04d", i))
				if err != nil {
					return err
				}
				m.FleetState = api.FleetTerminated
				if err := tx.PutMachine(m); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// BenchmarkDashboardReplicasPage renders the first page of the replicas
// view of a fleet of 1,000 machines and 10,000 replicas, through the whole
// handler (session, API call in process, template):
//
//	go test -run '^$' -bench DashboardReplicasPage -count 6 ./server
func BenchmarkDashboardReplicasPage(b *testing.B) {
	ts, _ := withTestCluster(b, func(c *Config) { c.Controller.Interval, c.TLS.Disabled = time.Hour, true })
	fillFleet(b, ts, 1000, 10)
	hc, _ := ts.signedIn(b, ts.AdminToken())
	b.ResetTimer()
	for b.Loop() {
		resp, err := hc.Get(ts.URL() + "/ui/replicas?page=50")
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}
