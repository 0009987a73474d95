package api

import (
	"sort"
	"strings"
)

// LabelsMatch reports whether labels carry every key and value of
// selector (an empty selector matches everything).
func LabelsMatch(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// SelectorString writes a selector as key=value pairs, sorted and
// comma-separated: one selector, one string.
func SelectorString(sel map[string]string) string {
	parts := make([]string, 0, len(sel))
	for k, v := range sel {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
