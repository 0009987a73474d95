package target

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/replica/ingest"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
	"k8s.io/utils/clock"
)

// Kubernetes is the Kubernetes target as a server runs it: a watch per
// Kubernetes cluster while the server leads. Its implementation
// (package target/kube, on client-go) is handed to the server by the
// command, as the cloud providers are, so that the server builds without
// it.
type Kubernetes interface {
	// RunTerm runs the watches for one term as leader.
	RunTerm(ctx context.Context)
	// AfterPass is the control loop's hook: the watches learn its
	// decisions.
	AfterPass()
	// Observations are what each cluster's watch knows, by cluster.
	Observations() map[string]KubernetesObservation
	// PodLogs streams the output of a replica's Pod (tail < 0: all of it).
	PodLogs(ctx context.Context, settings spec.KubernetesSettings, replicaID string, req api.LogRequest) (io.ReadCloser, error)
}

// NewKubernetes builds the Kubernetes target of a server.
type NewKubernetes func(host KubernetesHost, log *slog.Logger, clk clock.WithTicker) Kubernetes

// KubernetesHost is what the Kubernetes target needs of the server it
// runs in.
type KubernetesHost struct {
	// Store is read for what the clusters must run.
	Store store.Store
	// Fenced takes the Pods' states: it writes only while this server
	// leads.
	Fenced store.Store
	// Reads are the reads beyond the store's lists, within tx.
	Reads func(tx store.Tx) KubernetesReads
	// Sink records replica states.
	Sink ingest.Sink
	// Trigger wakes the control loop.
	Trigger func()
	// Interval is how often, beside the control loop's passes, what the
	// clusters must run is read again.
	Interval time.Duration
}

// KubernetesReads are what the target reads beyond the store's lists: the
// spec a replica runs (its revision's; nil when its service is gone) and
// the values of a spec's secret env (the server holds the key that opens
// Secrets).
type KubernetesReads struct {
	SpecOf func(r *api.Replica) (*api.ServiceSpec, error)
	// SecretEnv is a spec's secret env; an error wrapping
	// ErrSecretMissing when a Secret or key it names does not exist.
	SecretEnv func(sp api.ServiceSpec) (map[string]string, error)
}

// ErrSecretMissing marks a Secret (or key) a replica needs that does not
// exist: its Pod is left out until it does. Any other error is the
// store's.
var ErrSecretMissing = errors.New("secret missing")

// ErrNoKubernetes is the answer of a server built without the Kubernetes
// target.
var ErrNoKubernetes = errors.New("this server was built without the Kubernetes target")

// NoKubernetes is the target of a server built without one: it watches
// nothing and observes nothing, so its clusters' conditions say they are
// not watched.
type NoKubernetes struct{}

// RunTerm waits for the term's end.
func (NoKubernetes) RunTerm(ctx context.Context) { <-ctx.Done() }

// AfterPass does nothing.
func (NoKubernetes) AfterPass() {}

// Observations are none.
func (NoKubernetes) Observations() map[string]KubernetesObservation { return nil }

// PodLogs fails with ErrNoKubernetes.
func (NoKubernetes) PodLogs(context.Context, spec.KubernetesSettings, string, api.LogRequest) (io.ReadCloser, error) {
	return nil, ErrNoKubernetes
}
