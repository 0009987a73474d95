package controller

import "time"

// dutyBudget keeps the loop's share of time in passes under MaxDutyCycle
// over a window (DutyWindow), as a bucket of owed rest: a pass of d owes
// d×(1/MaxDutyCycle−1) of rest, and the time the loop spends outside
// passes pays it back, resting or idle. The loop rests only for what it
// owes beyond the window's slack, (1−MaxDutyCycle)×DutyWindow. A change
// that finds the loop idle is decided at once; a storm of changes still
// leaves the CPU MaxDutyCycle of the time, after a burst of at most
// MaxDutyCycle×DutyWindow in passes. With no window, every pass is
// followed by its whole rest.
type dutyBudget struct {
	owed time.Duration
	// at is when owed was last reckoned: the end of the last pass.
	at time.Time
}

// passed books a pass that ended at end after taking d (the time before
// it paid back what was owed, not the pass).
func (b *dutyBudget) passed(cfg Config, end time.Time, d time.Duration) {
	b.owed = b.owedAt(end.Add(-d)) + cfg.restAfter(d)
	if cfg.MaxRest > 0 {
		// What is beyond one capped rest is forgiven: after a pass of
		// minutes the loop rests MaxRest once, not after every pass.
		b.owed = min(b.owed, cfg.dutySlack()+cfg.MaxRest)
	}
	b.at = end
}

// owedAt is the rest still owed at now.
func (b *dutyBudget) owedAt(now time.Time) time.Duration {
	if b.at.IsZero() {
		return b.owed
	}
	return max(0, b.owed-now.Sub(b.at))
}

// rest is how long the loop must rest at now before its next pass: what
// it owes beyond the window's slack, at most MaxRest.
func (b *dutyBudget) rest(cfg Config, now time.Time) time.Duration {
	wait := b.owedAt(now) - cfg.dutySlack()
	if wait <= 0 {
		return 0
	}
	if cfg.MaxRest > 0 {
		wait = min(wait, cfg.MaxRest)
	}
	return wait
}

// dutySlack is the rest the loop may owe and still pass at once.
func (cfg Config) dutySlack() time.Duration {
	duty := cfg.MaxDutyCycle
	if duty <= 0 || duty >= 1 || cfg.DutyWindow <= 0 {
		return 0
	}
	return time.Duration(float64(cfg.DutyWindow) * (1 - duty))
}

// restAfter is the rest a pass that took d owes: what keeps the loop's
// duty cycle under MaxDutyCycle.
func (cfg Config) restAfter(d time.Duration) time.Duration {
	duty := cfg.MaxDutyCycle
	if duty <= 0 || duty >= 1 || d <= 0 {
		return 0
	}
	return time.Duration(float64(d) * (1/duty - 1))
}
