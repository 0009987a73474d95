package server

import (
	"net/http"

	"github.com/gantry-dev/gantry/server/respond"
)

// errorf is respond.Errorf, as the server's handlers call it.
func errorf(status int, code, field, format string, args ...any) *respond.Error {
	return respond.Errorf(status, code, field, format, args...)
}

func writeJSON(w http.ResponseWriter, status int, v any) { respond.JSON(w, status, v) }

type list[T any] = respond.List[T]

// writeError answers with a JSON error body; internal errors are logged
// and answered without detail.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	respond.Fail(w, r, s.log, err)
}

// bodies bounds the request bodies the server reads.
func (s *Server) bodies() respond.Bodies {
	return respond.Bodies{MaxBytes: s.cfg.MaxRequestBytes, ReadTimeout: s.cfg.BodyReadTimeout}
}

func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return s.bodies().Read(w, r)
}

func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, into any) error {
	return s.bodies().Decode(w, r, into)
}
