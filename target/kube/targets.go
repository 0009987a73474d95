package kube

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/target"
	"github.com/gantry-dev/gantry/target/kube/clientset"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
)

// Config tunes the Kubernetes target.
type Config struct {
	// Backoff is the wait after a failed call, doubled on each failure
	// in a row up to MaxBackoff.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// CallTimeout bounds one API call.
	CallTimeout time.Duration
	// Resync is how often the informers hand every object over again, so
	// that anything missed is reconciled.
	Resync time.Duration
	// QPS and Burst limit the calls to one API server.
	QPS   float32
	Burst int
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Backoff: time.Second, MaxBackoff: time.Minute, CallTimeout: 30 * time.Second, Resync: 5 * time.Minute, QPS: 20, Burst: 40}
}

// Targets runs a watch per Kubernetes cluster, while this server leads.
type Targets struct {
	cfg    Config
	log    *slog.Logger
	clock  clock.Clock
	report func(cluster string, obs []Observed) error
	notify func()

	mu      sync.Mutex
	ctx     context.Context
	running map[string]*running
	// last is what Set was handed before Run: the term begins there.
	last []Desired
}

type running struct {
	key string // the settings the watch's client was made from
	// retryAt is when to try again to make a client that failed.
	retryAt time.Time
	// settings are the cluster's; retiring: the cluster is gone, and its
	// watch deletes what it had before it stops.
	settings spec.KubernetesSettings
	retiring bool
	w        *watch
	client   clientset.Interface
	stop     context.CancelFunc
	done     chan struct{}
}

// New returns the targets. report receives the Pods' states by cluster;
// notify is called when what a decision depends on changed (an API
// server's health, a cluster's RuntimeClasses).
func New(cfg Config, log *slog.Logger, clk clock.Clock, report func(cluster string, obs []Observed) error, notify func()) *Targets {
	return &Targets{cfg: cfg, log: log, clock: clk, report: report, notify: notify, running: map[string]*running{}}
}

// Run makes the targets work until ctx ends (one leadership term); then
// every watch stops.
func (t *Targets) Run(ctx context.Context) {
	t.mu.Lock()
	t.ctx = ctx
	t.setLocked(t.last)
	t.mu.Unlock()
	<-ctx.Done()
	t.mu.Lock()
	all := t.running
	// What this term was handed may be stale by the next: another server
	// may lead between them.
	t.running, t.ctx, t.last = map[string]*running{}, nil, nil
	t.mu.Unlock()
	for _, r := range all {
		r.stop()
		<-r.done
	}
}

// Set hands each Kubernetes cluster what it must run: a watch starts for
// a new cluster (or one whose connection settings changed), and stops for
// a cluster that is gone. Outside Run, it waits for Run.
func (t *Targets) Set(all []Desired) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last = all
	if t.ctx != nil {
		t.setLocked(all)
	}
}

func (t *Targets) setLocked(all []Desired) {
	seen := map[string]bool{}
	for _, d := range all {
		seen[d.Cluster] = true
		key := fmt.Sprintf("%s\x00%s\x00%s", d.Settings.Kubeconfig, d.Settings.Context, d.Settings.Namespace)
		r := t.running[d.Cluster]
		if r != nil && (r.key != key || (r.client == nil && !t.clock.Now().Before(r.retryAt))) {
			t.stopLocked(d.Cluster)
			r = nil
		}
		if r == nil {
			var err error
			if r, err = t.startLocked(d, key); err != nil {
				t.log.Warn("kubernetes cluster unreachable", "cluster", d.Cluster, "err", err)
				continue
			}
		}
		r.retiring = false
		r.w.set(d)
	}
	for name, r := range t.running {
		if !seen[name] {
			t.retireLocked(name, r)
		}
	}
}

// retireLocked winds down the watch of a cluster that is gone: it is
// handed nothing to run, so it deletes the Pods, Services and Secrets
// left (of services deleted with their cluster), then stops.
func (t *Targets) retireLocked(name string, r *running) {
	switch {
	case r.client == nil || r.w.cleared.Load():
		t.stopLocked(name)
	case !r.retiring:
		r.retiring = true
		r.w.set(Desired{Cluster: name, Settings: r.settings})
	}
}

func (t *Targets) startLocked(d Desired, key string) (*running, error) {
	client, err := Client(d.Settings, t.cfg)
	w := newWatch(t.cfg, t.log, t.clock, client, func(obs []Observed) error { return t.report(d.Cluster, obs) }, t.notify)
	if err != nil {
		// The watch is kept to report why: its condition says so.
		w.recordCall(err)
		r := &running{key: key, retryAt: t.clock.Now().Add(t.cfg.MaxBackoff), settings: d.Settings, w: w, stop: func() {}, done: closed()}
		t.running[d.Cluster] = r
		return r, err
	}
	ctx, cancel := context.WithCancel(t.ctx)
	r := &running{key: key, settings: d.Settings, w: w, client: client, stop: cancel, done: make(chan struct{})}
	t.running[d.Cluster] = r
	go func() {
		defer close(r.done)
		w.run(ctx, d)
	}()
	return r, nil
}

func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// stopLocked stops a cluster's watch; it ends on its own.
func (t *Targets) stopLocked(cluster string) {
	t.running[cluster].stop()
	delete(t.running, cluster)
}

// Observations are what each cluster's watch knows, by cluster.
func (t *Targets) Observations() map[string]target.KubernetesObservation {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]target.KubernetesObservation, len(t.running))
	for name, r := range t.running {
		out[name] = r.w.observation()
	}
	return out
}

// PodLogs streams the output of a replica's Pod (tail < 0: all of it).
func PodLogs(ctx context.Context, settings spec.KubernetesSettings, cfg Config, replicaID string, req api.LogRequest) (io.ReadCloser, error) {
	client, err := Client(settings, cfg)
	if err != nil {
		return nil, err
	}
	tail := req.Tail
	opts := &corev1.PodLogOptions{Container: containerName, Follow: req.Follow, Previous: req.Previous}
	if tail >= 0 {
		n := int64(tail)
		opts.TailLines = &n
	}
	rc, err := client.CoreV1().Pods(settings.Namespace).GetLogs(PodName(replicaID), opts).Stream(ctx)
	if err != nil {
		return nil, classify("logs of Pod "+settings.Namespace+"/"+PodName(replicaID), err)
	}
	return rc, nil
}

// Client connects to a cluster's API server: the kubeconfig (and context)
// its settings name, or kubectl's default files, or the in-cluster
// configuration.
func Client(s spec.KubernetesSettings, cfg Config) (clientset.Interface, error) {
	rc, err := RESTConfig(s)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst, rc.Timeout = cfg.QPS, cfg.Burst, 0
	rc.UserAgent = "gantry"
	client, err := clientset.New(rc)
	if err != nil {
		return nil, provisioner.Errorf(provisioner.KindInvalid, "kubernetes client", "%v", err)
	}
	return client, nil
}

// RESTConfig is the connection a cluster's settings describe.
func RESTConfig(s spec.KubernetesSettings) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if s.Kubeconfig != "" {
		rules.ExplicitPath = s.Kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: s.Context}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, provisioner.Errorf(provisioner.KindInvalid, "kubeconfig", "%v", err)
	}
	return rc, nil
}
