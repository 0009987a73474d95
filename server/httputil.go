package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// httpError is an error with the status and field to answer with.
type httpError struct {
	status int
	code   string
	field  string
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func errorf(status int, code, field, format string, args ...any) *httpError {
	return &httpError{status: status, code: code, field: field, msg: fmt.Sprintf(format, args...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

type list[T any] struct {
	// Metadata: for the kinds in the change feed.
	Metadata *api.ListMeta `json:"metadata,omitempty"`
	Items    []T           `json:"items"`
}

// writeError answers with a JSON error body; internal errors are logged
// and answered without detail.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	var fieldErrs spec.ErrorList
	switch {
	case errors.As(err, &he):
	case errors.As(err, &fieldErrs):
		he = errorf(http.StatusBadRequest, "invalid", fieldErrs[0].Path, "%s", fieldErrs.Error())
	case errors.Is(err, store.ErrNotFound):
		he = errorf(http.StatusNotFound, "not-found", "", "%s", err.Error())
	case errors.Is(err, store.ErrUnavailable):
		// The store's own failure (disk full, read-only): say so, so that
		// clients see more than "internal error"; store errors carry no
		// secret values.
		s.log.Error("store unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		he = errorf(http.StatusServiceUnavailable, "store-unavailable", "", "the server cannot use its store: %v", err)
	case errors.Is(err, store.ErrCompacted):
		he = errorf(http.StatusGone, api.ErrorExpired, "resourceVersion", "%s", err.Error())
	case errors.Is(err, store.ErrConflict):
		he = errorf(http.StatusConflict, "conflict", "metadata.resourceVersion", "%s", err.Error())
	case errors.Is(err, store.ErrExists):
		he = errorf(http.StatusConflict, "conflict", "", "%s", err.Error())
	default:
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		he = errorf(http.StatusInternalServerError, "internal", "", "internal error (see server log)")
	}
	writeJSON(w, he.status, api.ErrorBody{Error: api.ErrorDetail{Code: he.code, Message: he.msg, Field: he.field}})
}

// readBody reads a request body up to the configured limit, within
// BodyReadTimeout: a client that sends a header and then nothing is cut
// off. (The deadline is per body, not http.Server.ReadTimeout, which
// would also end long polls and followed logs.)
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rc := http.NewResponseController(w)
	if s.cfg.BodyReadTimeout > 0 {
		// A socket deadline is wall-clock time, whatever the server's clock.
		_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout))
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBytes))
	if err != nil {
		w.Header().Set("Connection", "close") // what is left of the body is not read
	} else if s.cfg.BodyReadTimeout > 0 {
		_ = rc.SetReadDeadline(time.Time{}) // long polls and followed logs read no more
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, errorf(http.StatusRequestEntityTooLarge, "too-large", "", "request body exceeds %d bytes", s.cfg.MaxRequestBytes)
	}
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "bad-request", "", "read request body: %v", err)
	}
	return data, nil
}

// decodeJSON decodes a JSON body strictly: unknown fields and trailing
// data are errors that name what was wrong.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, into any) error {
	data, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return errorf(http.StatusBadRequest, "invalid", jsonErrorField(err), "request body: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, "invalid", "", "request body: unexpected data after the JSON object")
	}
	return nil
}

func jsonErrorField(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return typeErr.Field
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return strings.Trim(name, `"`)
	}
	return ""
}
