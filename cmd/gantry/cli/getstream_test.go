package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"k8s.io/apimachinery/pkg/labels"
)

// signalWriter is a buffer that closes wrote at the first write.
type signalWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	once  sync.Once
	wrote chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.once.Do(func() { close(w.wrote) })
	return w.buf.Write(p)
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// `gantry get replicas` prints each chunk as it arrives: the server
// answers the second page only once the first chunk's rows are printed
// (it would wait forever for a client that prints the list whole). The
// header is printed once, and every replica once, in the server's order.
func TestGetPrintsEachChunkAsItArrives(t *testing.T) {
	out := &signalWriter{wrote: make(chan struct{})}
	pages := [][]api.Replica{
		{{ID: "web-0", Service: "web", State: api.ReplicaRunning}, {ID: "web-1", Service: "web", State: api.ReplicaRunning}},
		{{ID: "worker-0", Service: "worker", State: api.ReplicaPending}},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page := client.ReplicaPage{Items: pages[0]}
		page.Metadata.Continue = "next"
		if r.URL.Query().Get("continue") == "next" {
			select {
			case <-out.wrote:
			case <-time.After(10 * time.Second):
				http.Error(w, "the first chunk was not printed before the second was asked for", http.StatusGatewayTimeout)
				return
			}
			page = client.ReplicaPage{Items: pages[1]}
		}
		_ = json.NewEncoder(w).Encode(page)
	}))
	defer srv.Close()
	var errOut bytes.Buffer
	q := &getQuery{g: &globals{out: out, errOut: &errOut}, c: client.New(srv.URL, "t", srv.Client()), kind: "replicas",
		opts: getOptions{output: formatTable, chunkSize: 2}, selector: labels.Everything()}
	if err := q.once(context.Background()); err != nil {
		t.Fatalf("get: %v (%s)", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME") || strings.Count(out.String(), "NAME") != 1 {
		t.Fatalf("printed\n%s\nwant one header and three rows", out.String())
	}
	for i, want := range []string{"web-0", "web-1", "worker-0"} {
		if !strings.HasPrefix(lines[i+1], want+" ") {
			t.Errorf("row %d: %q, want %s", i+1, lines[i+1], want)
		}
	}
}
