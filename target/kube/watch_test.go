package kube

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/target/kube/clientset"
	"github.com/gantry-dev/gantry/target/kube/kubetest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clocktesting "k8s.io/utils/clock/testing"
)

// countingTransport counts the watch's own calls (its probes of the Pods
// it may not list), not the informers'.
type countingTransport struct {
	next  http.RoundTripper
	calls *atomic.Int32
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Query().Get("limit") == "1" && strings.HasSuffix(r.URL.Path, "/pods") {
		c.calls.Add(1)
	}
	return c.next.RoundTrip(r)
}

// TestFailedCallsBackOff: an API server that refuses every call is asked
// again only after the backoff, doubled each time, however often the
// watch is handed work meanwhile: never a tight loop.
func TestFailedCallsBackOff(t *testing.T) {
	env := kubetest.New(t)
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: env.Kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: "nobody"}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, calls: &calls} }
	client, err := clientset.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	cfg := DefaultConfig()
	w := newWatch(cfg, slog.New(slog.DiscardHandler), clk, client, func([]Observed) error { return nil }, func() {})
	settings, _ := spec.KubernetesConfig(api.ProviderSpec{Name: api.ProviderKubernetes})
	d := Desired{Cluster: "c", Settings: settings}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx, d) }()
	defer func() { cancel(); <-done }()

	w.set(d)
	waitCalls := func(n int32) {
		t.Helper()
		env.Eventually(t, 10*time.Second, "the watch waiting on its backoff", func() bool { return calls.Load() >= n && clk.HasWaiters() })
		if got := calls.Load(); got != n {
			t.Fatalf("%d calls, want %d", got, n)
		}
	}
	waitCalls(1)
	if obs := w.observation(); obs.ErrKind != provisioner.KindForbidden {
		t.Fatalf("observation %+v, want forbidden", obs)
	}
	for i := 0; i < 5; i++ {
		w.set(d) // every pass of the control loop hands it work
	}
	clk.Step(cfg.Backoff - time.Millisecond)
	waitCalls(1)
	clk.Step(time.Millisecond)
	waitCalls(2)
	clk.Step(cfg.Backoff) // the second backoff is twice the first
	waitCalls(2)
	clk.Step(cfg.Backoff)
	waitCalls(3)
}

// TestDeletingWhatIsGoneSucceeds: a Pod (or Service, or Secret) deleted
// by someone else first is deleted.
func TestDeletingWhatIsGoneSucceeds(t *testing.T) {
	env := kubetest.New(t)
	w := newWatch(DefaultConfig(), slog.New(slog.DiscardHandler), clocktesting.NewFakeClock(time.Now()), env.Client, func([]Observed) error { return nil }, func() {})
	err := w.delete(context.Background(), "Pod gone-0", func(ctx context.Context) error {
		return env.Client.CoreV1().Pods("default").Delete(ctx, kubetest.Name("gone"), metav1.DeleteOptions{})
	})
	if err != nil {
		t.Fatalf("deleting a Pod that does not exist: %v", err)
	}
}
