package ratelimit

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestBucketPerKey(t *testing.T) {
	l := New(Config{PerSecond: 1, Burst: 2, MaxKeys: 10})
	allowed := 0
	for range 3 {
		if l.Allow("a", t0) {
			allowed++
		}
	}
	if allowed != 2 {
		t.Fatalf("a bucket of 2 allowed %d of 3 calls at once", allowed)
	}
	if !l.Exhausted("a", t0) || l.Exhausted("b", t0) {
		t.Fatal("Exhausted disagrees with the buckets")
	}
	if !l.Allow("b", t0) {
		t.Fatal("another key shares a's bucket")
	}
	if !l.Allow("a", t0.Add(time.Second)) {
		t.Fatal("a's bucket did not refill")
	}
}

// 200,000 callers seen once each leave at most MaxKeys buckets, and
// callers idle long enough to be full again are forgotten outright.
func TestMemoryIsBounded(t *testing.T) {
	l := New(Config{PerSecond: 10, Burst: 10, MaxKeys: 1000})
	for i := range 200_000 {
		l.Allow(fmt.Sprintf("address/10.%d.%d.%d", i>>16, (i>>8)&255, i&255), t0)
	}
	if l.Len() != 1000 {
		t.Fatalf("%d callers remembered, want the cap of 1000", l.Len())
	}
	l.Allow("late", t0.Add(2*time.Second))
	if l.Len() != 1 {
		t.Fatalf("%d callers remembered after every bucket refilled, want 1", l.Len())
	}
}

// A caller over its limit stays limited while others come and go, as
// long as it keeps calling: it is the most recently seen.
func TestBusyCallerIsNotEvictedByNewOnes(t *testing.T) {
	l := New(Config{PerSecond: 1, Burst: 1, MaxKeys: 3})
	l.Allow("flood", t0)
	for i := range 100 {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		if l.Allow("flood", now) {
			t.Fatalf("call %d of the flooding caller allowed", i)
		}
		l.Allow(fmt.Sprint("other", i), now)
	}
}

func TestAddressKeyGroupsIPv6By64(t *testing.T) {
	cases := map[string]string{
		"192.0.2.7:4000":                "address/192.0.2.7",
		"[2001:db8:1:2:aaaa::1]:5000":   "address/2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff:ffff::9]:1": "address/2001:db8:1:2::/64",
		"[::ffff:192.0.2.7]:80":         "address/192.0.2.7",
		"not an address":                "address/not an address",
	}
	for in, want := range cases {
		if got := AddressKey(in); got != want {
			t.Errorf("AddressKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRejectionsAreReportedSampled(t *testing.T) {
	l := New(Config{PerSecond: 1, Burst: 1, MaxKeys: 10, ReportEvery: time.Second})
	reports, suppressed := 0, 0
	for i := range 3000 {
		if ok, n := l.Rejected(t0.Add(time.Duration(i) * time.Millisecond)); ok {
			reports++
			suppressed += n
		}
	}
	// The 999 after the third report wait for the next one.
	if reports != 3 || suppressed != 1998 {
		t.Fatalf("%d reports covering %d suppressed, want 3 covering 1998", reports, suppressed)
	}
}
