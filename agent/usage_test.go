package agent

import (
	"testing"
	"time"

	"github.com/gantry-dev/gantry/runtime"
)

// A replica's CPU rate is the CPU time it used between two samples of
// the same task over the time between them; a restarted task starts
// again from its own first sample.
func TestUsageRateFromTwoSamplesOfOneTask(t *testing.T) {
	u := newUsageMeter()
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	first, second := &fakeTask{}, &fakeTask{}
	if _, ok := u.rate("web-0", first, runtime.Sample{CPU: time.Second, MemoryBytes: 1 << 20}, t0); ok {
		t.Fatal("a rate from one sample")
	}
	got, ok := u.rate("web-0", first, runtime.Sample{CPU: 3 * time.Second, MemoryBytes: 2 << 20}, t0.Add(4*time.Second))
	if !ok || got.MilliCPU != 500 || got.MemoryBytes != 2<<20 {
		t.Fatalf("usage %+v %v, want 500m (2 s of CPU in 4 s) and 2Mi", got, ok)
	}
	if _, ok := u.rate("web-0", second, runtime.Sample{CPU: time.Millisecond}, t0.Add(5*time.Second)); ok {
		t.Fatal("a rate across a restart (the new task's CPU time starts at 0)")
	}
}

// fakeTask is a task that is only ever compared.
type fakeTask struct{ runtime.Task }
