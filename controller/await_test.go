package controller

import (
	"context"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// timedClock is the fake clock, telling each timer made (when, and for
// how long); the loop must make no ticker.
type timedClock struct {
	*clocktesting.FakeClock
	t     *testing.T
	timer chan [2]time.Time
}

// NewTimer tells of the timer only once the fake clock holds it: told
// before, the test could step the clock past a timer not yet there, and
// the timer would never fire.
func (c *timedClock) NewTimer(d time.Duration) clock.Timer {
	now := c.Now()
	timer := c.FakeClock.NewTimer(d)
	c.timer <- [2]time.Time{now, now.Add(d)}
	return timer
}

func (c *timedClock) NewTicker(time.Duration) clock.Ticker {
	c.t.Error("the loop made a ticker: its untriggered passes keep a fixed beat, not Interval after the last pass")
	return c.FakeClock.NewTicker(time.Hour)
}

// The loop's next untriggered pass comes Interval after its last pass,
// not on a fixed beat: after a pass a change triggered at 1.5 s, the next
// is at 3.5 s (a ticker's at 2 s was a pass more for the next change to
// wait behind).
func TestUntriggeredPassComesIntervalAfterTheLast(t *testing.T) {
	e := newEnv(t)
	interval := e.ctrl.cfg.Interval
	clk := &timedClock{FakeClock: e.clock, t: t, timer: make(chan [2]time.Time, 16)}
	e.ctrl.Clock = clk
	passed := make(chan time.Time, 16)
	e.ctrl.AfterPass = func() { passed <- clk.Now() }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.ctrl.Run(ctx) }()
	defer func() { cancel(); <-done }()
	next := func(what string, ch <-chan time.Time) time.Time {
		t.Helper()
		select {
		case at := <-ch:
			return at
		case <-time.After(time.Minute):
			t.Fatalf("no %s within a minute", what)
			return time.Time{}
		}
	}
	awaiting := func(from time.Time) {
		t.Helper()
		select {
		case tm := <-clk.timer:
			if !tm[0].Equal(from) || tm[1].Sub(tm[0]) != interval {
				t.Fatalf("after the pass at %s the loop waits until %s, want %s", from.Sub(start), tm[1].Sub(start), from.Add(interval).Sub(start))
			}
		case <-time.After(time.Minute):
			t.Fatal("the loop made no timer within a minute")
		}
	}
	first := next("first pass", passed)
	awaiting(first)
	clk.Step(interval * 3 / 4)
	e.ctrl.Trigger()
	triggered := next("triggered pass", passed)
	if triggered.Sub(first) != interval*3/4 {
		t.Fatalf("the triggered pass ran at %s", triggered.Sub(start))
	}
	awaiting(triggered)
	clk.Step(interval)
	if at := next("untriggered pass", passed); !at.Equal(triggered.Add(interval)) {
		t.Fatalf("the untriggered pass ran at %s, want %s", at.Sub(start), triggered.Add(interval).Sub(start))
	}
}
