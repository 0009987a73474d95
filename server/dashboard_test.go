package server

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
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
	ts, ctx := withTestCluster(t, func(c *Config) { c.UI.LiveInterval = time.Hour })
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
