package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
)

func clusterServer(t *testing.T, name string, status int) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status != http.StatusOK {
			w.WriteHeader(status)
			return
		}
		_ = json.NewEncoder(w).Encode(api.Cluster{Metadata: api.ObjectMeta{Name: name}})
	}))
	t.Cleanup(s.Close)
	return s
}

// A client of several servers moves past one that does not answer, or
// answers that it cannot serve, and keeps to the one that answered.
func TestClientMovesToAServerThatAnswers(t *testing.T) {
	gone := clusterServer(t, "gone", http.StatusOK)
	gone.Close()
	unavailable := clusterServer(t, "unavailable", http.StatusServiceUnavailable)
	healthy := clusterServer(t, "healthy", http.StatusOK)
	c := New(gone.URL+", "+unavailable.URL+","+healthy.URL+"/", "", nil)
	got, err := c.GetCluster(context.Background(), "x")
	if err != nil || got.Metadata.Name != "healthy" {
		t.Fatalf("GetCluster: %+v %v", got, err)
	}
	if first := c.Servers()[0]; first != healthy.URL {
		t.Fatalf("current server %s, want the one that answered (%s)", first, healthy.URL)
	}
	c.SetServers([]string{unavailable.URL, healthy.URL})
	if first := c.Servers()[0]; first != healthy.URL {
		t.Fatalf("a new list keeps the current server first: %v", c.Servers())
	}
}

// With one server, its own error is the answer: nothing to move to.
func TestOneServerReturnsItsError(t *testing.T) {
	s := clusterServer(t, "", http.StatusServiceUnavailable)
	_, err := New(s.URL, "", nil).GetCluster(context.Background(), "x")
	if !IsStatus(err, http.StatusServiceUnavailable) {
		t.Fatalf("error %v, want the server's 503", err)
	}
}

func TestAllServersDown(t *testing.T) {
	a := clusterServer(t, "", http.StatusOK)
	a.Close()
	if _, err := New(a.URL, "", nil).GetCluster(context.Background(), "x"); err == nil {
		t.Fatal("a server that is down must fail the call")
	}
}

// A server that accepts the call and never answers (stopped, or cut off
// without a reset) holds a call no longer than the attempt timeout: the
// next server answers it, and is tried first from then on.
func TestAttemptTimeoutMovesPastAHangingServer(t *testing.T) {
	release := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); hanging.Close() })
	healthy := clusterServer(t, "healthy", http.StatusOK)
	c := New(hanging.URL+","+healthy.URL, "", nil).WithAttemptTimeout(50 * time.Millisecond)
	// The call's own deadline is far longer: only the attempt timeout can
	// move it on in time.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := c.GetCluster(ctx, "x")
	if err != nil || got.Metadata.Name != "healthy" {
		t.Fatalf("GetCluster: %+v %v", got, err)
	}
	if first := c.Servers()[0]; first != healthy.URL {
		t.Fatalf("current server %s, want the one that answered (%s)", first, healthy.URL)
	}
}
