package controller

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// The loop rests in proportion to its last pass, up to MaxRest: after a
// pass of minutes (a 50,000-machine join storm took some) a change waits
// MaxRest, not as long again.
func TestRestIsCappedByMaxRest(t *testing.T) {
	for _, tc := range []struct {
		pass, want time.Duration
	}{
		{pass: 2 * time.Second, want: 2 * time.Second},
		{pass: 6 * time.Minute, want: 10 * time.Second},
	} {
		fake := clocktesting.NewFakeClock(time.Now())
		c := &Controller{cfg: Config{MaxDutyCycle: 0.5, MaxRest: 10 * time.Second}, Deps: Deps{Clock: fake}}
		done := make(chan bool)
		go func() { done <- c.rest(context.Background(), tc.pass) }()
		for !fake.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		fake.Step(tc.want - time.Nanosecond)
		select {
		case <-done:
			t.Fatalf("after a pass of %s: rested less than %s", tc.pass, tc.want)
		case <-time.After(50 * time.Millisecond):
		}
		fake.Step(time.Nanosecond)
		if !<-done {
			t.Fatalf("after a pass of %s: rest said the loop ended", tc.pass)
		}
	}
}
