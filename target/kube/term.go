package kube

import (
	"context"
	"fmt"
	"log/slog"

	"io"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/target"
	"k8s.io/utils/clock"
)

// Target is the Kubernetes target's act side in a server: a watch per
// Kubernetes cluster while the server leads, handed what the clusters
// must run after each pass of the control loop, reporting their Pods'
// states to the store.
type Target struct {
	*Targets
	host   target.KubernetesHost
	log    *slog.Logger
	clock  clock.WithTicker
	passed chan struct{}
}

// Factory is how a command hands the Kubernetes target to its server.
func Factory(cfg Config) target.NewKubernetes {
	return func(host target.KubernetesHost, log *slog.Logger, clk clock.WithTicker) target.Kubernetes {
		return NewTarget(cfg, host, log, clk)
	}
}

// NewTarget returns the target; RunTerm runs it.
func NewTarget(cfg Config, host target.KubernetesHost, log *slog.Logger, clk clock.WithTicker) *Target {
	t := &Target{host: host, log: log, clock: clk, passed: make(chan struct{}, 1)}
	t.Targets = New(cfg, log, clk, t.recordPods, func() { host.Trigger() })
	return t
}

// RunTerm runs the watches for one term as leader: after every pass of
// the control loop (and every Interval) they are handed what their
// clusters must run, read from the store.
func (t *Target) RunTerm(ctx context.Context) {
	watching := make(chan struct{})
	go func() { defer close(watching); t.Run(ctx) }()
	defer func() { <-watching }() // a next term starts with no watch of this one
	ticker := t.clock.NewTicker(t.host.Interval)
	defer ticker.Stop()
	for {
		if err := t.sync(ctx); err != nil && ctx.Err() == nil {
			t.log.Warn("read what the kubernetes clusters run", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		case <-t.passed:
		}
	}
}

// AfterPass is the control loop's hook: the watches learn its decisions.
func (t *Target) AfterPass() {
	select {
	case t.passed <- struct{}{}:
	default:
	}
}

// sync reads what every Kubernetes cluster must run and hands it to the
// watches.
func (t *Target) sync(ctx context.Context) error {
	var all []Desired
	err := t.host.Store.View(ctx, func(tx store.Tx) error {
		var err error
		all, err = DesireAll(tx, t.host.Reads(tx), t.log)
		return err
	})
	if err != nil {
		return err
	}
	t.Set(all)
	return nil
}

// recordPods records what a cluster's Pod watch observed, a batch in one
// transaction, and wakes the control loop when a replica's state changed.
func (t *Target) recordPods(cluster string, observed []Observed) error {
	changed := false
	err := t.host.Fenced.Update(context.Background(), func(tx store.Tx) error {
		var err error
		changed, err = RecordPods(tx, cluster, observed, t.host.Sink, t.clock.Now())
		return err
	})
	if err != nil {
		return fmt.Errorf("record Pod states of cluster %s: %w", cluster, err)
	}
	if changed {
		t.host.Trigger()
	}
	return nil
}

// PodLogs streams the output of a replica's Pod (tail < 0: all of it).
func (t *Target) PodLogs(ctx context.Context, settings spec.KubernetesSettings, replicaID string, req api.LogRequest) (io.ReadCloser, error) {
	return PodLogs(ctx, settings, t.cfg, replicaID, req)
}
