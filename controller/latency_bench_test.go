package controller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/metrics"
	"github.com/gantry-dev/gantry/store"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// BenchmarkDecisionLatency50k runs the leader's loop as a server runs it
// (Run, on the real clock, a Trigger after each write) over the steady
// fleet of BenchmarkPassSteady50k, and writes b.N lone changes (a service
// scaled by one) at random moments, one a second on average (exponential
// gaps, seeded). It reports the decision latency the loop itself
// observes (gantry_decision_latency_seconds: from a change's commit to
// the end of the act step of the pass that first read it; a pass that
// read several observes its oldest): p50, p99 and the largest, in ms.
// The changes begin once the loop has settled (a pass decided nothing):
// the first passes of a term book the whole fleet, a leader change's
// cost, not a lone change's. A change that arrives while a pass runs
// waits for it and its own pass, and for a rest when the loop owes one
// (MaxDutyCycle over DutyWindow). gap=1s,beating then records a
// heartbeat of every machine first, as a server's liveness table holds,
// and gap=1s,beats=5000 records 5,000 a second all the while, as
// servers flush them.
//
//	go test ./controller -run '^$' -bench DecisionLatency50k -benchtime 200x -timeout 60m
func BenchmarkDecisionLatency50k(b *testing.B) {
	c := steadyFleetOn(b, 50000, 5000, func(start time.Time) benchClock { return &shiftedClock{shift: time.Until(start)} })
	b.Run("gap=1s", func(b *testing.B) { benchLatency(b, c, time.Second) })
	// As on a server, where every machine's heartbeat is recorded (the
	// liveness table each sync reads whole), none late.
	hb := newHeartbeats(b, c)
	b.Run("gap=1s,beating", func(b *testing.B) {
		recordBeats(b, hb)
		benchLatency(b, c, time.Second)
	})
	// And heartbeats flowing as three servers flush them: each a third of
	// 5,000 a second (every machine's each ten seconds), once a second.
	b.Run("gap=1s,beats=5000", func(b *testing.B) {
		stop := flowBeats(b, hb, 5000, 3)
		defer stop()
		benchLatency(b, c, time.Second)
	})
}

// flowBeats records perSecond heartbeats of hb a second, in flushes
// writes a second, on the real clock until stopped.
func flowBeats(b *testing.B, hb *heartbeats, perSecond, flushes int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(time.Second / time.Duration(flushes))
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			if err := hb.record(ctx, perSecond/flushes); err != nil && ctx.Err() == nil {
				b.Error(err)
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}

// benchLatency writes b.N changes gap apart on average to c's running
// loop and reports the latencies it observed.
func benchLatency(b *testing.B, c *Controller, gap time.Duration) {
	recorded := &recordingHistogram{Histogram: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "latency"})}
	c.Metrics = metrics.New(prometheus.NewRegistry())
	c.Metrics.DecisionLatency = recorded
	passes := &recordingHistogram{Histogram: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "passes"})}
	c.Metrics.ReconcileDuration = passes
	// After each pass the loop says up to which revision it has read (and
	// carried out), and whether the pass decided nothing (the loop is
	// settled: the first passes of a term book the whole fleet).
	read := make(chan int64, 1)
	settled := make(chan struct{})
	var settle sync.Once
	c.AfterPass = func() {
		select {
		case <-read:
		default:
		}
		read <- c.feed.after
		if c.quiet != nil {
			settle.Do(func() { close(settled) })
		}
	}
	defer func() { c.AfterPass = nil }()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	select {
	case <-settled:
	case <-time.After(5 * time.Minute):
		b.Fatal("the loop did not settle within five minutes")
	}
	passes.reset() // the passes that settled the loop are not the changes'
	rng := rand.New(rand.NewPCG(1, uint64(b.N)))
	b.ResetTimer()
	var last int64
	for i := range b.N {
		// The changes arrive on the real clock: the latency measured is
		// the loop's, passes and rests included.
		time.Sleep(time.Duration(rng.ExpFloat64() * float64(gap)))
		rev, err := scaleService(ctx, c.Store, fmt.Sprintf("svc%d", i%5000))
		if err != nil {
			b.Fatal(err)
		}
		last = rev
		c.Trigger()
	}
	for carried := false; !carried; { // until a pass has read the last change and acted on it
		select {
		case rev := <-read:
			carried = rev >= last
		case <-time.After(time.Minute):
			b.Fatal("the last change was not carried out within a minute")
		}
	}
	b.StopTimer()
	cancel()
	<-done
	samples := recorded.sorted()
	if len(samples) == 0 {
		b.Fatal("no decision observed")
	}
	quantile := func(q float64) float64 { return samples[min(len(samples)-1, int(q*float64(len(samples))))] * 1000 }
	b.ReportMetric(quantile(0.5), "p50-ms")
	b.ReportMetric(quantile(0.9), "p90-ms")
	b.ReportMetric(quantile(0.99), "p99-ms")
	b.ReportMetric(samples[len(samples)-1]*1000, "max-ms")
	// The passes' own times: a change waits for the pass under way, then
	// for its own.
	if took := passes.sorted(); len(took) > 0 {
		b.ReportMetric(took[len(took)/2]*1000, "pass-p50-ms")
		b.ReportMetric(took[len(took)*9/10]*1000, "pass-p90-ms")
	}
	b.ReportMetric(float64(len(samples)), "decisions")
	b.ReportMetric(0, "ns/op")
}

// scaleService gives a service one replica more, and returns the store's
// revision after it.
func scaleService(ctx context.Context, st store.Store, name string) (int64, error) {
	var rev int64
	err := st.Update(ctx, func(tx store.Tx) error {
		s, err := tx.GetService(name)
		if err != nil {
			return err
		}
		more := *s
		replicas := *s.Spec.Replicas + 1
		more.Spec.Replicas = &replicas
		if err := tx.PutService(&more); err != nil {
			return err
		}
		rev, err = tx.Revision()
		return err
	})
	return rev, err
}

// shiftedClock is the real clock, moved to another moment: the harness's
// fleet was made at a fixed time.
type shiftedClock struct {
	clock.RealClock
	shift time.Duration
}

func (c *shiftedClock) Now() time.Time                  { return time.Now().Add(c.shift) }
func (c *shiftedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// recordingHistogram keeps every observation too.
type recordingHistogram struct {
	prometheus.Histogram
	mu      sync.Mutex
	samples []float64
}

func (h *recordingHistogram) Observe(v float64) {
	h.mu.Lock()
	h.samples = append(h.samples, v)
	h.mu.Unlock()
	h.Histogram.Observe(v)
}

func (h *recordingHistogram) reset() {
	h.mu.Lock()
	h.samples = nil
	h.mu.Unlock()
}

func (h *recordingHistogram) sorted() []float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(slices.Values(h.samples))
}
