package ui

import (
	"fmt"
	"html/template"
	"net/url"
	"time"
)

func funcs() template.FuncMap {
	return template.FuncMap{
		"pct":     percent,
		"cpu":     func(milli int64) string { return fmt.Sprintf("%.2g", float64(milli)/1000) },
		"mem":     formatBytes,
		"money":   func(perHour float64) string { return fmt.Sprintf("$%.3f", perHour) },
		"gap":     func(gap float64) string { return fmt.Sprintf("%.1f%%", gap*100) },
		"ago":     ago,
		"agoPtr":  func(now time.Time, t *time.Time) string { return agoPtr(now, t) },
		"clock":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
		"percent": func(done, of int) int { return percent(int64(done), int64(of)) },
		"list":    func(items ...string) []string { return items },
		"dict":    dict,
		"link":    objectLink,
		"share": func(part, whole float64) int {
			if whole <= 0 {
				return 0
			}
			return int(min(100, part*100/whole))
		},
	}
}

// objectLink is the dashboard page of an event's object, "" for a kind
// without one.
func objectLink(kind, name string) string {
	switch kind {
	case "Service":
		return "/ui/services/" + url.PathEscape(name)
	case "Replica":
		return "/ui/replicas/" + url.PathEscape(name)
	case "Machine":
		return "/ui/replicas?machine=" + url.QueryEscape(name)
	case "Cluster":
		return "/ui/#cluster-" + url.PathEscape(name)
	case "FailoverGroup":
		return "/ui/failover#group-" + url.PathEscape(name)
	}
	return ""
}

// dict builds a map from key, value pairs, for passing several values to
// a template.
func dict(pairs ...any) (map[string]any, error) {
	if len(pairs)%2 != 0 {
		return nil, fmt.Errorf("dict: want key, value pairs")
	}
	m := make(map[string]any, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		key, ok := pairs[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict: key %v is not a string", pairs[i])
		}
		m[key] = pairs[i+1]
	}
	return m, nil
}

func percent(part, whole int64) int {
	if whole <= 0 {
		return 0
	}
	return int(min(100, part*100/whole))
}

func formatBytes(n int64) string {
	const gi, mi = 1 << 30, 1 << 20
	if n >= gi {
		return fmt.Sprintf("%.1fGi", float64(n)/gi)
	}
	return fmt.Sprintf("%dMi", n/mi)
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t).Round(time.Second)
	switch {
	case d < 0:
		return "now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

func agoPtr(now time.Time, t *time.Time) string {
	if t == nil {
		return "—"
	}
	return ago(now, *t)
}
