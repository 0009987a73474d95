// Package ratelimit keeps token buckets per caller (a token, a client
// address) in bounded memory: a caller idle long enough for its bucket to
// be full again is forgotten (a new bucket is the same), and past MaxKeys
// the least recently seen caller is forgotten first, so callers the
// server has never authenticated cannot grow its memory.
package ratelimit

import (
	"container/list"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Config is one limit. PerSecond ≤ 0 disables it.
type Config struct {
	PerSecond float64
	Burst     int
	// MaxKeys bounds the callers remembered at once.
	MaxKeys int
	// ReportEvery bounds how often a rejection is reported (audited):
	// at most once per interval for the whole limiter, with the count of
	// rejections since the last report.
	ReportEvery time.Duration
}

// Limiter is a set of buckets, one per key.
type Limiter struct {
	cfg Config
	mu  sync.Mutex
	// lru holds *entry, least recently seen first.
	lru        *list.List
	keys       map[string]*list.Element
	reportedAt time.Time
	suppressed int
}

type entry struct {
	key    string
	bucket *rate.Limiter
	seen   time.Time
}

// New returns a limiter for cfg.
func New(cfg Config) *Limiter {
	if cfg.MaxKeys < 1 {
		cfg.MaxKeys = 1
	}
	cfg.Burst = max(cfg.Burst, 1)
	return &Limiter{cfg: cfg, lru: list.New(), keys: map[string]*list.Element{}}
}

// Config is the limit this limiter enforces.
func (l *Limiter) Config() Config { return l.cfg }

// Allow takes one token from key's bucket at now; false when it has none.
func (l *Limiter) Allow(key string, now time.Time) bool {
	if l.cfg.PerSecond <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bucket(key, now).AllowN(now, 1)
}

// Exhausted says whether key's bucket is empty at now, without taking a
// token (nor remembering a key it does not know).
func (l *Limiter) Exhausted(key string, now time.Time) bool {
	if l.cfg.PerSecond <= 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.keys[key]
	if !ok {
		return false
	}
	return el.Value.(*entry).bucket.TokensAt(now) < 1
}

// Len is how many callers are remembered.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}

// Rejected counts a rejection and says whether to report it now, with
// how many rejections went unreported before it.
func (l *Limiter) Rejected(now time.Time) (report bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.reportedAt.IsZero() && now.Sub(l.reportedAt) < l.cfg.ReportEvery {
		l.suppressed++
		return false, 0
	}
	suppressed, l.suppressed, l.reportedAt = l.suppressed, 0, now
	return true, suppressed
}

func (l *Limiter) bucket(key string, now time.Time) *rate.Limiter {
	if el, ok := l.keys[key]; ok {
		e := el.Value.(*entry)
		e.seen = now
		l.lru.MoveToBack(el)
		return e.bucket
	}
	l.forgetIdle(now)
	for l.lru.Len() >= l.cfg.MaxKeys {
		l.forget(l.lru.Front())
	}
	e := &entry{key: key, bucket: rate.NewLimiter(rate.Limit(l.cfg.PerSecond), l.cfg.Burst), seen: now}
	l.keys[key] = l.lru.PushBack(e)
	return e.bucket
}

// forgetIdle drops, from the least recently seen on, the callers whose
// buckets have refilled: remembering them changes nothing.
func (l *Limiter) forgetIdle(now time.Time) {
	refill := time.Duration(float64(l.cfg.Burst) / l.cfg.PerSecond * float64(time.Second))
	for el := l.lru.Front(); el != nil; el = l.lru.Front() {
		if now.Sub(el.Value.(*entry).seen) < refill {
			return
		}
		l.forget(el)
	}
}

func (l *Limiter) forget(el *list.Element) {
	delete(l.keys, el.Value.(*entry).key)
	l.lru.Remove(el)
}

// AddressKey is the caller key of a client address ("host:port"): the
// IPv4 address, or the /64 an IPv6 address is in (one host holds a whole
// /64, so keying by address would let it pick as many keys as it likes).
func AddressKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return "address/" + host
	}
	addr = addr.Unmap()
	if addr.Is6() {
		prefix, _ := addr.Prefix(64)
		return "address/" + prefix.String()
	}
	return "address/" + addr.String()
}
