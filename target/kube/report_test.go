package kube

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func runningPod(name, version string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: version, Labels: map[string]string{LabelReplica: name, LabelRevision: "rev1"}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// A failed store write does not lose Pod states: the batch goes back in
// the queue (under any newer state of the same Pod) and is reported
// again after the backoff, and a resync of an unchanged Pod reports it
// again too.
func TestPodStatesSurviveAFailedReport(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	var failures int
	recorded := map[string]string{}
	reports := make(chan struct{}, 100)
	report := func(obs []Observed) error {
		defer func() { reports <- struct{}{} }()
		mu.Lock()
		defer mu.Unlock()
		if failures > 0 {
			failures--
			return errors.New("store unavailable")
		}
		for _, o := range obs {
			recorded[o.Pod] = string(o.Status.State)
		}
		return nil
	}
	cfg := DefaultConfig()
	w := newWatch(cfg, slog.New(slog.DiscardHandler), clk, nil, report, func() {})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go w.reportStates(ctx)

	mu.Lock()
	failures = 2
	mu.Unlock()
	w.observePod(runningPod("a", "1"))
	<-reports // the first attempt fails
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if cond() {
				return
			}
		}
		t.Fatalf("gave up waiting for %s", what)
	}
	until("the retry's timer", clk.HasWaiters)
	clk.Step(cfg.Backoff)
	<-reports // the second attempt fails: the backoff doubles
	until("the second retry's timer", clk.HasWaiters)
	clk.Step(cfg.Backoff)
	mu.Lock()
	if len(recorded) != 0 {
		t.Fatal("reported before the doubled backoff passed")
	}
	mu.Unlock()
	clk.Step(cfg.Backoff)
	<-reports
	mu.Lock()
	got := recorded["ns/a"]
	mu.Unlock()
	if got != "running" {
		t.Fatalf("after two failed writes, Pod a recorded %q, want running", got)
	}
}
