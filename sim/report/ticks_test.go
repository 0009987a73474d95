package report

import (
	"slices"
	"testing"
	"time"
)

// A time axis is labelled on round times of a step that gives a few
// labels, with the date where the day changes; finer ticks go unlabelled
// between them.
func TestTimeAxisTicksOnRoundTimes(t *testing.T) {
	at := func(s string) float64 {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return float64(tm.Unix())
	}
	for _, c := range []struct {
		name, from, to string
		labels         []string
		minorEvery     time.Duration
	}{
		{"three days", "2026-03-02T00:00:00Z", "2026-03-05T00:00:00Z",
			[]string{"Mar 2\n00:00", "12:00", "Mar 3\n00:00", "12:00", "Mar 4\n00:00", "12:00", "Mar 5\n00:00"}, 3 * time.Hour},
		{"two hours from an odd minute", "2026-01-01T22:47:13Z", "2026-01-02T00:51:00Z",
			[]string{"Jan 1\n23:00", "23:30", "Jan 2\n00:00", "00:30"}, 10 * time.Minute},
		{"a month", "2026-01-01T00:00:00Z", "2026-01-31T00:00:00Z",
			[]string{"Jan 1", "Jan 8", "Jan 15", "Jan 22", "Jan 29"}, 24 * time.Hour},
	} {
		ticks := calendarTicks{}.Ticks(at(c.from), at(c.to))
		var labels []string
		for i, tick := range ticks {
			if tick.Label != "" {
				labels = append(labels, tick.Label)
			}
			if tick.Value < at(c.from) || tick.Value > at(c.to) {
				t.Errorf("%s: a tick at %v, outside the axis", c.name, unixTime(tick.Value))
			}
			if i > 0 && time.Duration(tick.Value-ticks[i-1].Value)*time.Second != c.minorEvery {
				t.Errorf("%s: ticks %v and %v, want %s apart", c.name, unixTime(ticks[i-1].Value), unixTime(tick.Value), c.minorEvery)
			}
		}
		if !slices.Equal(labels, c.labels) {
			t.Errorf("%s: labels %q, want %q", c.name, labels, c.labels)
		}
	}
}
