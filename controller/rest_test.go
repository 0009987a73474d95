package controller

import (
	"testing"
	"time"
)

// The loop rests in proportion to its last pass, up to MaxRest: after a
// pass of minutes (a 50,000-machine join storm took some) a change waits
// MaxRest, not as long again.
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
		if got := tc.cfg.restAfter(tc.pass); got != tc.want {
			t.Errorf("duty %.1f, cap %s, after a pass of %s: rest %s, want %s", tc.cfg.MaxDutyCycle, tc.cfg.MaxRest, tc.pass, got, tc.want)
		}
	}
}
