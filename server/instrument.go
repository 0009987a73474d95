package server

import (
	"net/http"
	"time"
)

// instrumented counts each API request by its route (the pattern that
// matched, or "unmatched") and status code, and times it.
func (s *Server) instrumented(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		route := r.Pattern
		if route == "" || route == "/" {
			route = "unmatched"
		}
		s.metrics.Served(route, rec.status, time.Since(start).Seconds())
	})
}

// statusRecorder remembers the status a handler answered; it flushes
// through, and Unwrap lets http.ResponseController reach the connection.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
