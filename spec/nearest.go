package spec

import "strings"

// Nearest is the candidate closest to word by edit distance (ignoring
// case), when it is close enough to be a typo of it: at most a third of
// the longer word's letters differ (at least one). "" when none is.
func Nearest(word string, candidates []string) string {
	best, bestDistance := "", -1
	lower := strings.ToLower(word)
	for _, c := range candidates {
		d := editDistance(lower, strings.ToLower(c))
		if limit := max(1, max(len(word), len(c))/3); d > limit {
			continue
		}
		if bestDistance < 0 || d < bestDistance {
			best, bestDistance = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance, with a swap of two adjacent
// letters counted as one edit (optimal string alignment).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
