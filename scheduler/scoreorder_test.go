package scheduler

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortByScoreIsTheComparisonSort: the radix sort orders as the
// comparison sort of (score descending, position) does, with ties, zeros
// of both signs, negative and overcommitted shares and NaN among them.
func TestSortByScoreIsTheComparisonSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	special := []float64{0, math.Copysign(0, -1), math.NaN(), -0.25, 1, 1.5, math.Inf(1), math.Inf(-1)}
	for _, n := range []int{0, 1, 2, 3, 17, 256, 1000, 5000} {
		for _, distinct := range []int{1, 3, 40, 1 << 30} {
			byScore := make([]scored, n)
			for i := range byScore {
				score := float64(rng.IntN(distinct)) / 7
				if rng.IntN(10) == 0 {
					score = special[rng.IntN(len(special))]
				}
				byScore[i] = scored{score: score, at: i}
			}
			want := slices.Clone(byScore)
			slices.SortFunc(want, func(a, b scored) int { return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.at, b.at)) })
			var scratch *Scratch
			if n%2 == 0 {
				scratch = &Scratch{}
			}
			tmp, keys := scratch.sortLists(n)
			sortByScore(byScore, tmp, keys)
			for i := range want {
				if byScore[i].at != want[i].at {
					t.Fatalf("%d machines, %d distinct scores: at %d the radix sort has the machine at %d (score %v), the comparison sort %d (score %v)",
						n, distinct, i, byScore[i].at, byScore[i].score, want[i].at, want[i].score)
				}
			}
		}
	}
}

// BenchmarkSortByScore10k: the order of 10,000 machines of a few sizes
// by how full they are.
func BenchmarkSortByScore10k(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	in := make([]scored, 10000)
	for i := range in {
		in[i] = scored{score: (float64(rng.IntN(8)*500)/3900 + float64(rng.IntN(8)<<30)/float64(15<<30)) / 2, at: i}
	}
	byScore := make([]scored, len(in))
	scratch := &Scratch{}
	for b.Loop() {
		copy(byScore, in)
		tmp, keys := scratch.sortLists(len(in))
		sortByScore(byScore, tmp, keys)
	}
}
