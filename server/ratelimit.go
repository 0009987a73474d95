package server

import (
	"context"
	"net/http"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/internal/ratelimit"
	"github.com/gantry-dev/gantry/store"
)

// Mutating calls are rate limited per caller: per token (the admin, a
// machine), and per client address for the unauthenticated join. A caller
// over its rate gets 429 naming the limit; nothing is changed. Failed
// authentication is limited per client address too: past its burst of
// failures an address gets 429 before its token is even looked at. Both
// keep bounded state (package ratelimit) and audit their rejections,
// sampled, so a flood costs neither memory nor a write per call.
type rateLimits struct {
	mutating     *ratelimit.Limiter
	authFailures *ratelimit.Limiter
}

// RateLimits are the per-caller limits.
type RateLimits struct {
	// MutatingRate and MutatingBurst limit each caller's mutating calls
	// (per token; per address for joins); 0 disables the limit.
	MutatingRate  float64
	MutatingBurst int
	// AuthFailureRate and AuthFailureBurst limit each client address's
	// failed authentications (API bearer tokens, dashboard sign-ins).
	AuthFailureRate  float64
	AuthFailureBurst int
	// Callers is how many callers each limit remembers at once.
	Callers int
	// AuditEvery is how often, at most, a limit's rejections are audited.
	AuditEvery time.Duration
}

// DefaultRateLimits: 50 mutating calls a second (burst 100); 20 failed
// authentications, then one a second; 10,000 callers each.
func DefaultRateLimits() RateLimits {
	return RateLimits{MutatingRate: 50, MutatingBurst: 100, AuthFailureRate: 1, AuthFailureBurst: 20, Callers: 10_000, AuditEvery: 10 * time.Second}
}

func newRateLimits(cfg RateLimits) *rateLimits {
	return &rateLimits{
		mutating:     ratelimit.New(ratelimit.Config{PerSecond: cfg.MutatingRate, Burst: cfg.MutatingBurst, MaxKeys: cfg.Callers, ReportEvery: cfg.AuditEvery}),
		authFailures: ratelimit.New(ratelimit.Config{PerSecond: cfg.AuthFailureRate, Burst: cfg.AuthFailureBurst, MaxKeys: cfg.Callers, ReportEvery: cfg.AuditEvery}),
	}
}

// limited rejects a mutating call over its caller's rate.
func (s *Server) limited(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who, _ := r.Context().Value(principalKey{}).(principal)
		caller := who.String()
		if caller == "anonymous" {
			caller = ratelimit.AddressKey(r.RemoteAddr)
		}
		now := s.clock.Now()
		if !s.rates.mutating.Allow(caller, now) {
			cfg := s.rates.mutating.Config()
			s.auditRejection(s.rates.mutating, r, caller, "RateLimited")
			w.Header().Set("Retry-After", "1")
			s.writeError(w, r, errorf(http.StatusTooManyRequests, "rate-limited", "",
				"%s is over the limit of %g mutating calls per second (burst %d): retry later", caller, cfg.PerSecond, cfg.Burst))
			return
		}
		h(w, r)
	}
}

// authBlocked answers 429 to an address that failed authentication too
// often. Calls from within the process (the dashboard's, with no client
// address) are limited where they come in.
func (s *Server) authBlocked(w http.ResponseWriter, r *http.Request) bool {
	if r.RemoteAddr == "" {
		return false
	}
	address := ratelimit.AddressKey(r.RemoteAddr)
	if !s.rates.authFailures.Exhausted(address, s.clock.Now()) {
		return false
	}
	cfg := s.rates.authFailures.Config()
	s.auditRejection(s.rates.authFailures, r, address, "AuthenticationLimited")
	w.Header().Set("Retry-After", "1")
	s.writeError(w, r, errorf(http.StatusTooManyRequests, "rate-limited", "",
		"%s failed authentication more than %d times (then %g a second): retry later", address, cfg.Burst, cfg.PerSecond))
	return true
}

// authFailed counts a failed authentication against its address.
func (s *Server) authFailed(r *http.Request) {
	if r.RemoteAddr != "" {
		s.rates.authFailures.Allow(ratelimit.AddressKey(r.RemoteAddr), s.clock.Now())
	}
}

// auditRejection records a rejection as an Audit event, at most once per
// AuditEvery for each limit, with how many went unrecorded before it.
func (s *Server) auditRejection(l *ratelimit.Limiter, r *http.Request, caller, reason string) {
	now := s.clock.Now()
	report, suppressed := l.Rejected(now)
	if !report {
		return
	}
	err := s.store.Update(context.WithoutCancel(r.Context()), func(tx store.Tx) error {
		return store.Record(tx, now, api.EventWarning, reason, auditKind, caller, "%s %s %s → 429 (%d more rejections by this limit since the last recorded)",
			caller, r.Method, r.URL.Path, suppressed)
	})
	if err != nil {
		s.log.Warn("audit a rejection", "caller", caller, "err", err)
	}
}
