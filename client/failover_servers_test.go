package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// When every server answers that it cannot serve, the error says what
// each one said, not a bare "HTTP 502".
func TestUnavailableServersSayWhy(t *testing.T) {
	gone := func(msg string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte(`{"error":{"code":"relay-failed","message":"` + msg + `"}}`))
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	a, b := gone("the logs of machine m1 are relayed by the server at s1, which did not answer"), gone("no agent connection for m1 yet")
	c := New(a.URL+","+b.URL, "token", nil)
	_, err := c.Logs(context.Background(), "web-0", LogOptions{Tail: 10})
	if err == nil || !strings.Contains(err.Error(), "relayed by the server at s1") || !strings.Contains(err.Error(), "no agent connection") && !strings.Contains(err.Error(), b.URL) {
		t.Fatalf("got %v, want the servers' own reasons", err)
	}
}
