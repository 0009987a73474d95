package server

import (
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
