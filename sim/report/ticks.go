package report

import (
	"time"

	"gonum.org/v1/plot"
)

// calendarTicks marks a time axis (Unix seconds, UTC) on round times: the
// largest step of tickSteps that still gives at least minTicks labelled
// ticks, each on a multiple of its step since midnight, with unlabelled
// ticks between at a finer step. A label gives the date at a day's first
// tick and the time of day when the step is under a day.
type calendarTicks struct{}

// tickSteps are the steps a time axis is labelled at, coarsest last; each
// with the step of its unlabelled ticks.
var tickSteps = []struct{ major, minor time.Duration }{
	{time.Minute, 15 * time.Second}, {5 * time.Minute, time.Minute}, {15 * time.Minute, 5 * time.Minute},
	{30 * time.Minute, 10 * time.Minute}, {time.Hour, 15 * time.Minute}, {3 * time.Hour, time.Hour},
	{6 * time.Hour, time.Hour}, {12 * time.Hour, 3 * time.Hour}, {24 * time.Hour, 6 * time.Hour},
	{48 * time.Hour, 12 * time.Hour}, {7 * 24 * time.Hour, 24 * time.Hour},
}

const minTicks, maxTicks = 3, 7

// Ticks implements plot.Ticker.
func (calendarTicks) Ticks(min, max float64) []plot.Tick {
	from, to := unixTime(min), unixTime(max)
	step := tickSteps[0]
	for _, s := range tickSteps {
		if count(from, to, s.major) < minTicks {
			break
		}
		step = s
		if count(from, to, s.major) <= maxTicks {
			break
		}
	}
	var ticks []plot.Tick
	lastDay := ""
	for t := roundUp(from, step.minor); !t.After(to); t = t.Add(step.minor) {
		tick := plot.Tick{Value: float64(t.Unix())}
		if onStep(t, step.major) {
			tick.Label = label(t, step.major, &lastDay)
		}
		ticks = append(ticks, tick)
	}
	return ticks
}

// label is a labelled tick's text: the date when the day changed since
// the last label (or the step is a day or more), and the time of day when
// the step is under a day.
func label(t time.Time, step time.Duration, lastDay *string) string {
	day := t.Format("Jan 2")
	if step >= 24*time.Hour {
		return day
	}
	clock := t.Format("15:04")
	if day != *lastDay {
		*lastDay = day
		return day + "\n" + clock
	}
	return clock
}

func unixTime(s float64) time.Time { return time.Unix(int64(s), 0).UTC() }

// midnight is the start of t's day (UTC).
func midnight(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// onStep: t is a multiple of step since its midnight (steps over a day:
// since the Unix epoch's midnight, so that two-day ticks do not restart
// each day).
func onStep(t time.Time, step time.Duration) bool {
	if step > 24*time.Hour {
		return t.Sub(time.Unix(0, 0).UTC())%step == 0
	}
	return t.Sub(midnight(t))%step == 0
}

// roundUp is the first multiple of step (as onStep counts it) at or after t.
func roundUp(t time.Time, step time.Duration) time.Time {
	base := midnight(t)
	if step > 24*time.Hour {
		base = time.Unix(0, 0).UTC()
	}
	since := t.Sub(base)
	if rest := since % step; rest != 0 {
		since += step - rest
	}
	return base.Add(since)
}

// count is how many multiples of step lie between from and to.
func count(from, to time.Time, step time.Duration) int {
	n := 0
	for t := roundUp(from, step); !t.After(to) && n <= maxTicks; t = t.Add(step) {
		n++
	}
	return n
}
