package controller

import (
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)

// Without a window the loop rests in proportion to its last pass, up to
// MaxRest: after a pass of minutes (a 50,000-machine join storm took
// some) a change waits MaxRest, not as long again.
func TestRestIsCappedByMaxRest(t *testing.T) {
	capped := Config{MaxDutyCycle: 0.5, MaxRest: 10 * time.Second}
	for _, tc := range []struct {
		cfg        Config
		pass, want time.Duration
	}{
		{cfg: capped, pass: 2 * time.Second, want: 2 * time.Second},
		{cfg: capped, pass: 6 * time.Minute, want: 10 * time.Second},
		{cfg: Config{MaxDutyCycle: 0.1, MaxRest: time.Minute}, pass: 2 * time.Second, want: 18 * time.Second},
		{cfg: Config{MaxDutyCycle: 0.5}, pass: 6 * time.Minute, want: 6 * time.Minute}, // no cap
		{cfg: Config{MaxDutyCycle: 1, MaxRest: time.Second}, pass: time.Minute, want: 0},
	} {
		var b dutyBudget
		b.passed(tc.cfg, t0, tc.pass)
		if got := b.rest(tc.cfg, t0); got != tc.want {
			t.Errorf("duty %.1f, cap %s, after a pass of %s: rest %s, want %s", tc.cfg.MaxDutyCycle, tc.cfg.MaxRest, tc.pass, got, tc.want)
		}
	}
}

// A capped rest forgives the rest of what a long pass owed: the passes
// after it rest for themselves, not MaxRest each.
func TestLongPassIsForgivenAfterOneCappedRest(t *testing.T) {
	cfg := Config{MaxDutyCycle: 0.5, DutyWindow: 10 * time.Second, MaxRest: 10 * time.Second}
	var b dutyBudget
	now := t0.Add(6 * time.Minute)
	b.passed(cfg, now, 6*time.Minute)
	rest := b.rest(cfg, now)
	if rest != 10*time.Second {
		t.Fatalf("after a pass of 6m: rest %s, want the cap, 10s", rest)
	}
	now = now.Add(rest + time.Second)
	b.passed(cfg, now, time.Second)
	if got := b.rest(cfg, now); got != time.Second {
		t.Errorf("after a pass of 1s that followed the capped rest: rest %s, want 1s", got)
	}
}

// A change that finds the loop idle is decided at once, even right after
// a pass: the window's slack covers the pass's rest.
func TestIdleLoopPassesAtOnce(t *testing.T) {
	cfg := Config{MaxDutyCycle: 0.5, DutyWindow: 10 * time.Second, MaxRest: 10 * time.Second}
	var b dutyBudget
	b.passed(cfg, t0.Add(300*time.Millisecond), 300*time.Millisecond)
	if got := b.rest(cfg, t0.Add(300*time.Millisecond)); got != 0 {
		t.Errorf("right after a lone pass of 300ms: rest %s, want none", got)
	}
	if got := (Config{MaxDutyCycle: 0.5}).restAfter(300 * time.Millisecond); got != 300*time.Millisecond {
		t.Errorf("without a window a pass of 300ms owes %s, want 300ms", got)
	}
}

// Under a storm (a pass wanted at once after every pass) the loop passes
// back to back for about MaxDutyCycle×DutyWindow, then keeps its share of
// time in passes under MaxDutyCycle however long the storm lasts.
func TestStormKeepsTheDutyCycle(t *testing.T) {
	for _, duty := range []float64{0.5, 0.25} {
		cfg := Config{MaxDutyCycle: duty, DutyWindow: 10 * time.Second, MaxRest: 10 * time.Second}
		rng := rand.New(rand.NewPCG(1, uint64(duty*100)))
		var b dutyBudget
		now, inPasses, burst, rested := t0, time.Duration(0), time.Duration(0), false
		for range 2000 {
			d := time.Duration(rng.Int64N(int64(2 * time.Second)))
			now = now.Add(d)
			inPasses += d
			b.passed(cfg, now, d)
			rest := b.rest(cfg, now)
			if rest > 0 {
				rested = true
			} else if !rested {
				burst += d
			}
			now = now.Add(rest)
		}
		elapsed := now.Sub(t0)
		window := time.Duration(duty * float64(cfg.DutyWindow))
		if burst < window-2*time.Second || burst > window+2*time.Second {
			t.Errorf("duty %.2f: the first passes ran back to back for %s, want about %s", duty, burst, window)
		}
		if share := float64(inPasses) / float64(elapsed); share > duty+float64(window)/float64(elapsed) {
			t.Errorf("duty %.2f: %s of %s in passes (%.3f)", duty, inPasses, elapsed, share)
		}
		if share := float64(inPasses) / float64(elapsed); share < duty*0.95 {
			t.Errorf("duty %.2f: only %.3f of the time in passes under a storm: the loop rests more than it owes", duty, share)
		}
	}
}
