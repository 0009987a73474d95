package scheduler

import "math"

// sortByScore orders machines fullest first, ties by position in the
// session's input (byScore comes in that order): the order a comparison
// sort of (score descending, position) gives, by a stable radix sort of
// the scores' bits instead. At 10,000 machines the comparison sort was a
// twentieth of a steady pass, once for scheduling and once for the
// planner's what-if; this is about four times quicker. tmp and keys are
// working lists of at least len(byScore).
func sortByScore(byScore, tmp []scored, keys []uint64) {
	n := len(byScore)
	if n < 2 {
		return
	}
	keys, keysTmp := keys[:n], keys[n:2*n]
	tmp = tmp[:n]
	var differ uint64
	for i := range byScore {
		keys[i] = descendingKey(byScore[i].score)
		differ |= keys[i] ^ keys[0]
	}
	src, dst, srcKeys, dstKeys := byScore, tmp, keys, keysTmp
	for shift := uint(0); shift < 64; shift += 8 {
		if (differ>>shift)&0xff == 0 {
			continue // every key has this byte: the pass would keep the order
		}
		var start [256]int
		for _, k := range srcKeys {
			start[(k>>shift)&0xff]++
		}
		sum := 0
		for b, c := range start {
			start[b] = sum
			sum += c
		}
		for i, k := range srcKeys {
			b := (k >> shift) & 0xff
			dst[start[b]], dstKeys[start[b]] = src[i], k
			start[b]++
		}
		src, dst, srcKeys, dstKeys = dst, src, dstKeys, srcKeys
	}
	if &src[0] != &byScore[0] {
		copy(byScore, src)
	}
}

// descendingKey maps a score to a key whose ascending order is the
// scores' descending order as cmp.Compare has it: -0 equal to 0, NaN
// below every number (so last).
func descendingKey(f float64) uint64 {
	switch {
	case f != f:
		return math.MaxUint64
	case f == 0:
		f = 0
	}
	b := math.Float64bits(f)
	if b>>63 == 1 {
		b = ^b
	} else {
		b |= 1 << 63
	}
	return ^b
}
