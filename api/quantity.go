package api

import (
	"fmt"
	"math"
	"math/big"
	"strings"
)

var binarySuffixes = map[string]int64{
	"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60,
}

var decimalSuffixes = map[string]int64{
	"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
}

// ParseCPU turns "500m", "2", "0.25" into millicores.
func ParseCPU(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty cpu quantity")
	}
	if strings.HasSuffix(s, "m") {
		n, ok := new(big.Rat).SetString(strings.TrimSuffix(s, "m"))
		if !ok || !n.IsInt() || n.Sign() < 0 {
			return 0, fmt.Errorf("invalid cpu quantity %q: want a number of cores (\"2\", \"0.5\") or millicores (\"500m\")", s)
		}
		return ratToInt64(n, s)
	}
	n, ok := parseDecimal(s)
	if !ok || n.Sign() < 0 {
		return 0, fmt.Errorf("invalid cpu quantity %q: want a number of cores (\"2\", \"0.5\") or millicores (\"500m\")", s)
	}
	milli := new(big.Rat).Mul(n, big.NewRat(1000, 1))
	if !milli.IsInt() {
		return 0, fmt.Errorf("invalid cpu quantity %q: finer than 1 millicore", s)
	}
	return ratToInt64(milli, s)
}

// ParseBytes turns "512Mi", "1G", "1048576" into bytes.
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty byte quantity")
	}
	number, mult := s, int64(1)
	for suffix, m := range binarySuffixes {
		if strings.HasSuffix(s, suffix) {
			number, mult = strings.TrimSuffix(s, suffix), m
		}
	}
	if mult == 1 {
		for suffix, m := range decimalSuffixes {
			if strings.HasSuffix(s, suffix) {
				number, mult = strings.TrimSuffix(s, suffix), m
			}
		}
	}
	n, ok := parseDecimal(number)
	if !ok || n.Sign() < 0 {
		return 0, fmt.Errorf("invalid byte quantity %q: want a number with an optional unit (Ki, Mi, Gi, Ti, k, M, G, T)", s)
	}
	total := new(big.Rat).Mul(n, new(big.Rat).SetInt64(mult))
	if !total.IsInt() {
		return 0, fmt.Errorf("invalid byte quantity %q: not a whole number of bytes", s)
	}
	return ratToInt64(total, s)
}

// parseDecimal accepts plain decimals only (no exponents, fractions or
// hex), the way operators write quantities.
func parseDecimal(s string) (*big.Rat, bool) {
	if s == "" || strings.Count(s, ".") > 1 {
		return nil, false
	}
	for i, c := range s {
		if (c < '0' || c > '9') && c != '.' && !(i == 0 && c == '+') {
			return nil, false
		}
	}
	if s == "." || s == "+" {
		return nil, false
	}
	return new(big.Rat).SetString(s)
}

func ratToInt64(r *big.Rat, orig string) (int64, error) {
	n := r.Num()
	if !n.IsInt64() || n.Int64() > math.MaxInt64/2 {
		return 0, fmt.Errorf("quantity %q is too large", orig)
	}
	return n.Int64(), nil
}

// FormatCPU renders millicores the way an operator would write them.
func FormatCPU(milli int64) string {
	if milli%1000 == 0 {
		return fmt.Sprintf("%d", milli/1000)
	}
	return fmt.Sprintf("%dm", milli)
}

// FormatBytes renders bytes with the largest binary unit that divides them,
// or one decimal place of GiB/MiB when none does.
func FormatBytes(b int64) string {
	units := []struct {
		suffix string
		size   int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}}
	for _, u := range units {
		if b >= u.size && b%u.size == 0 {
			return fmt.Sprintf("%d%s", b/u.size, u.suffix)
		}
	}
	for _, u := range units {
		if b >= u.size {
			return fmt.Sprintf("%.1f%s", float64(b)/float64(u.size), u.suffix)
		}
	}
	return fmt.Sprintf("%d", b)
}
