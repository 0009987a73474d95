package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	clocktesting "k8s.io/utils/clock/testing"
)

// serveFrom answers one request as coming from address, without a
// network: the way to be 20,000 clients in a test.
func serveFrom(h http.Handler, address, method, path, token, contentType string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.RemoteAddr = address
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func auditEvents(t *testing.T, ts *testServer, reason string) []api.Event {
	t.Helper()
	events, err := ts.admin.ListEvents(context.Background(), client.EventQuery{Kind: auditKind})
	if err != nil {
		t.Fatal(err)
	}
	var out []api.Event
	for _, e := range events {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// 3,000 wrong bearer tokens from one address: the first burst are 401,
// the rest 429 without a look at the token (the right one included), a
// few sampled audit events say so; another address is not affected.
func TestFailedAuthenticationIsLimitedPerAddress(t *testing.T) {
	// The buckets refill with the server's clock: a fake one keeps a
	// slow run's 3,000 requests within the burst's second (a loaded host
	// once saw 21 × 401).
	ts := startServer(t, func(c *Config) { c.Clock = clocktesting.NewFakeClock(time.Now()) })
	h := ts.Handler()
	burst := ts.cfg.RateLimits.AuthFailureBurst
	counts := map[int]int{}
	for i := range 3000 {
		rec := serveFrom(h, "192.0.2.9:4000", "GET", "/v1/clusters", fmt.Sprintf("wrong-%d", i), "", nil)
		counts[rec.Code]++
	}
	if counts[401] != burst || counts[429] != 3000-burst {
		t.Fatalf("answers %v, want %d × 401 then 429", counts, burst)
	}
	if rec := serveFrom(h, "192.0.2.9:4000", "GET", "/v1/clusters", ts.AdminToken(), "", nil); rec.Code != 429 {
		t.Fatalf("a blocked address with the right token: %d, want 429", rec.Code)
	}
	if rec := serveFrom(h, "192.0.2.10:4000", "GET", "/v1/clusters", ts.AdminToken(), "", nil); rec.Code != 200 {
		t.Fatalf("another address: %d, want 200", rec.Code)
	}
	audited := auditEvents(t, ts, "AuthenticationLimited")
	if len(audited) == 0 || len(audited) > 2 || !strings.Contains(audited[0].Message, "192.0.2.9") {
		t.Fatalf("audit of the rejections: %+v, want one or two sampled events naming the address", audited)
	}
}

// Joins with made-up tokens from 20,000 addresses leave the server no
// more callers than its limit remembers.
func TestJoinLimiterMemoryIsBounded(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.RateLimits.Callers = 500 })
	h := ts.Handler()
	for i := range 20_000 {
		addr := fmt.Sprintf("[2001:db8:%x::1]:5000", i)
		serveFrom(h, addr, "POST", "/v1/join", "", "application/json", []byte(`{"token":"made-up"}`))
	}
	if n, m := ts.rates.mutating.Len(), ts.rates.authFailures.Len(); n > 500 || m > 500 {
		t.Fatalf("limiters remember %d and %d callers, want at most 500", n, m)
	}
}

// Failed dashboard sign-ins are limited per address, and audited.
func TestDashboardSignInsAreLimited(t *testing.T) {
	ts := startServer(t, nil)
	h := ts.Handler()
	burst := ts.cfg.RateLimits.AuthFailureBurst
	counts := map[int]int{}
	for i := range 300 {
		form := url.Values{"token": {fmt.Sprintf("guess-%d", i)}}.Encode()
		rec := serveFrom(h, "198.51.100.4:999", "POST", "/ui/login", "", "application/x-www-form-urlencoded", []byte(form))
		counts[rec.Code]++
	}
	if counts[401] != burst || counts[429] != 300-burst {
		t.Fatalf("answers %v, want %d × 401 then 429", counts, burst)
	}
	if got := auditEvents(t, ts, "SignInLimited"); len(got) != 1 {
		t.Fatalf("%d SignInLimited audit events, want 1 (sampled)", len(got))
	}
}
