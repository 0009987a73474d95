package server

import (
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/store"
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

// Every server forgets what it verified of a machine's credential when
// the change feed brings a change of the machine (its termination, say),
// long before the cache's TTL.
func TestAChangeOfTheMachineDropsItsCachedCredential(t *testing.T) {
	ts, ctx := withTestCluster(t, func(c *Config) { c.CredentialCacheTTL = time.Hour })
	credential := ts.joinManual(t, "dev", "m1")
	agent := client.New(ts.URL(), credential, ts.http)
	// The server's own control loop writes m1 after its join, and each
	// such change drops the entry too: heartbeat until one stays cached.
	waitFor(t, 10*time.Second, "the credential cached", func() bool {
		if _, err := agent.Heartbeat(ctx, "m1", api.HeartbeatRequest{}); err != nil {
			t.Fatal(err)
		}
		return ts.credentials.valid("m1", credential, ts.clock.Now())
	})
	if err := ts.store.Update(ctx, func(tx store.Tx) error {
		m, err := tx.GetMachine("m1")
		if err != nil {
			return err
		}
		m.FleetState = api.FleetTerminated
		return tx.PutMachine(m)
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the cached credential dropped", func() bool { return !ts.credentials.valid("m1", credential, ts.clock.Now()) })
}
