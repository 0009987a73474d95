package server

import (
	"strings"
	"testing"
	"time"
)

func TestCredentialCache(t *testing.T) {
	now := time.Now()
	c := newCredentialCache(10 * time.Second)
	if c.valid("m1", "secret", now) {
		t.Fatal("nothing verified yet")
	}
	c.remember("m1", "secret", now)
	if !c.valid("m1", "secret", now.Add(9*time.Second)) {
		t.Fatal("a verified credential within its TTL")
	}
	if c.valid("m1", "other", now) || c.valid("m2", "secret", now) {
		t.Fatal("another token, or another machine, is not covered")
	}
	if c.valid("m1", "secret", now.Add(10*time.Second)) {
		t.Fatal("an expired entry must be read again")
	}
	off := newCredentialCache(0)
	off.remember("m1", "s", now)
	if off.valid("m1", "s", now) {
		t.Fatal("TTL 0 caches nothing")
	}
}

// A caller over its rate of mutating calls gets 429 naming the limit, and
// the call changes nothing; reads and other callers are not limited.
func TestMutatingCallsAreRateLimited(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.RateLimits.MutatingRate, c.RateLimits.MutatingBurst = 0.001, 2 })
	body := []byte(testCluster)
	for range 2 {
		if status, eb := ts.do(t, "POST", "/v1/apply", ts.AdminToken(), "application/yaml", body); status != 200 {
			t.Fatalf("within the burst: %d %+v", status, eb)
		}
	}
	before := ts.stateFingerprint(t)
	status, eb := ts.do(t, "POST", "/v1/apply", ts.AdminToken(), "application/yaml", []byte(strings.Replace(testCluster, "maxSize: 3", "maxSize: 2", 1)))
	if status != 429 || !strings.Contains(eb.Error.Message, "mutating calls per second") {
		t.Fatalf("over the rate: %d %+v", status, eb.Error)
	}
	if ts.stateFingerprint(t) != before {
		t.Fatal("a rate-limited call changed the state")
	}
	if status, _ := ts.do(t, "GET", "/v1/clusters", ts.AdminToken(), "", nil); status != 200 {
		t.Fatalf("reads are not limited: %d", status)
	}
}
