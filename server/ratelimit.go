package server

import (
	"net"
	"net/http"
	"sync"

	"golang.org/x/time/rate"
)

// Mutating calls are rate limited per caller: per token (the admin, a
// machine), and per client address for the unauthenticated join. A caller
// over its rate gets 429 naming the limit; nothing is changed.
type rateLimits struct {
	perSecond float64
	burst     int
	mu        sync.Mutex
	callers   map[string]*rate.Limiter
}

func newRateLimits(perSecond float64, burst int) *rateLimits {
	return &rateLimits{perSecond: perSecond, burst: burst, callers: map[string]*rate.Limiter{}}
}

func (l *rateLimits) allow(caller string) bool {
	if l.perSecond <= 0 {
		return true
	}
	l.mu.Lock()
	lim, ok := l.callers[caller]
	if !ok {
		lim = rate.NewLimiter(rate.Limit(l.perSecond), max(l.burst, 1))
		l.callers[caller] = lim
	}
	l.mu.Unlock()
	return lim.Allow()
}

// limited rejects a mutating call over its caller's rate.
func (s *Server) limited(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who, _ := r.Context().Value(principalKey{}).(principal)
		caller := who.String()
		if caller == "anonymous" {
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			caller = "address/" + host
		}
		if !s.rates.allow(caller) {
			w.Header().Set("Retry-After", "1")
			s.writeError(w, r, errorf(http.StatusTooManyRequests, "rate-limited", "",
				"%s is over the limit of %g mutating calls per second (burst %d): retry later", caller, s.rates.perSecond, s.rates.burst))
			return
		}
		h(w, r)
	}
}
