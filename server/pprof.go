package server

import (
	"context"
	"net/http"
	"net/http/pprof"
)

// servePprof serves the profiler until ctx ends.
func (s *Server) servePprof(ctx context.Context) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: s.cfg.PprofListen, Handler: mux, ReadHeaderTimeout: s.cfg.ReadHeaderTimeout}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	s.log.Info("profiler listening", "addr", s.cfg.PprofListen)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		s.log.Warn("profiler", "err", err)
	}
}
