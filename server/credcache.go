package server

import (
	"crypto/sha256"
	"sync"
	"time"
)

// credentialCache remembers machine credentials this server verified
// against the store, for CredentialCacheTTL: a fleet's heartbeats would
// otherwise each cost a read of the credential. A credential is made by
// a machine's first join and never replaced; every server also forgets a
// machine's entry when the change feed brings a change of the machine
// (its termination, say), so that a stale entry lives until then, or the
// TTL when a notification is lost.
type credentialCache struct {
	ttl time.Duration
	mu  sync.Mutex
	ok  map[string]verified // by machine
}

type verified struct {
	digest [sha256.Size]byte
	at     time.Time
}

func newCredentialCache(ttl time.Duration) *credentialCache {
	return &credentialCache{ttl: ttl, ok: map[string]verified{}}
}

func (c *credentialCache) valid(machine, token string, now time.Time) bool {
	if c.ttl <= 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.ok[machine]
	return ok && v.digest == sha256.Sum256([]byte(token)) && now.Sub(v.at) < c.ttl
}

// forget drops what was verified of a machine's credential.
func (c *credentialCache) forget(machine string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ok, machine)
}

func (c *credentialCache) remember(machine, token string, now time.Time) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ok[machine] = verified{digest: sha256.Sum256([]byte(token)), at: now}
}
