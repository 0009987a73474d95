package ui

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"sync"
	"time"
)

const sessionCookie = "gantry_session"

// sessions maps a random session id, the cookie's only content, to the
// token it signed in with; the token never leaves the server again.
type sessions struct {
	ttl  time.Duration
	now  func() time.Time
	mu   sync.Mutex
	byID map[string]session
}

type session struct {
	token   string
	expires time.Time
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{ttl: ttl, now: now, byID: map[string]session{}}
}

func (s *sessions) start(w http.ResponseWriter, token string, secure bool) {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw) // crypto/rand.Read never fails (Go 1.24+)
	id := hex.EncodeToString(raw)
	now := s.now()
	s.mu.Lock()
	for k, v := range s.byID {
		if now.After(v.expires) {
			delete(s.byID, k)
		}
	}
	s.byID[id] = session{token: token, expires: now.Add(s.ttl)}
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/ui", MaxAge: int(s.ttl.Seconds()),
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
}

func (s *sessions) token(r *http.Request) (string, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byID[c.Value]
	if !ok || s.now().After(v.expires) {
		delete(s.byID, c.Value)
		return "", false
	}
	return v.token, true
}

func (s *sessions) end(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.mu.Lock()
		delete(s.byID, c.Value)
		s.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: "/ui", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
}
