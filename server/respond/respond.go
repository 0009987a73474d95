// Package respond is how the server's HTTP handlers answer: JSON bodies,
// errors that carry their status, code and field, and request bodies
// read within bounds and decoded strictly.
package respond

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// Error is an error with the status and field to answer with.
type Error struct {
	Status int
	Code   string
	Field  string
	msg    string
}

func (e *Error) Error() string { return e.msg }

// Errorf is an error answered with status, code and field.
func Errorf(status int, code, field, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Field: field, msg: fmt.Sprintf(format, args...)}
}

// HasStatus reports whether err is an Error answered with status.
func HasStatus(err error, status int) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && e.Status == status
}

// JSON answers with v, indented.
func JSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// List is a list answer.
type List[T any] struct {
	// Metadata: for the kinds in the change feed.
	Metadata *api.ListMeta `json:"metadata,omitempty"`
	Items    []T           `json:"items"`
}

// Fail answers with a JSON error body; internal errors are logged to log
// and answered without detail.
func Fail(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var he *Error
	var fieldErrs spec.ErrorList
	switch {
	case errors.As(err, &he):
	case errors.As(err, &fieldErrs):
		he = Errorf(http.StatusBadRequest, "invalid", fieldErrs[0].Path, "%s", fieldErrs.Error())
	case errors.Is(err, store.ErrNotFound):
		he = Errorf(http.StatusNotFound, "not-found", "", "%s", err.Error())
	case errors.Is(err, store.ErrUnavailable):
		// The store's own failure (disk full, read-only): say so, so that
		// clients see more than "internal error"; store errors carry no
		// secret values.
		log.Error("store unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		he = Errorf(http.StatusServiceUnavailable, "store-unavailable", "", "the server cannot use its store: %v", err)
	case errors.Is(err, store.ErrCompacted):
		he = Errorf(http.StatusGone, api.ErrorExpired, "resourceVersion", "%s", err.Error())
	case errors.Is(err, store.ErrConflict):
		he = Errorf(http.StatusConflict, "conflict", "metadata.resourceVersion", "%s", err.Error())
	case errors.Is(err, store.ErrExists):
		he = Errorf(http.StatusConflict, "conflict", "", "%s", err.Error())
	default:
		log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		he = Errorf(http.StatusInternalServerError, "internal", "", "internal error (see server log)")
	}
	JSON(w, he.Status, api.ErrorBody{Error: api.ErrorDetail{Code: he.Code, Message: he.msg, Field: he.Field}})
}

// Bodies bounds request bodies.
type Bodies struct {
	// MaxBytes is the largest body read.
	MaxBytes int64
	// ReadTimeout is the longest a body may take to arrive (0: no limit).
	ReadTimeout time.Duration
}

// Read reads a request body up to MaxBytes, within ReadTimeout: a client
// that sends a header and then nothing is cut off. (The deadline is per
// body, not http.Server.ReadTimeout, which would also end long polls and
// followed logs.)
func (b Bodies) Read(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rc := http.NewResponseController(w)
	if b.ReadTimeout > 0 {
		// A socket deadline is wall-clock time, whatever the server's clock.
		_ = rc.SetReadDeadline(time.Now().Add(b.ReadTimeout))
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, b.MaxBytes))
	if err != nil {
		w.Header().Set("Connection", "close") // what is left of the body is not read
	} else if b.ReadTimeout > 0 {
		_ = rc.SetReadDeadline(time.Time{}) // long polls and followed logs read no more
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, Errorf(http.StatusRequestEntityTooLarge, "too-large", "", "request body exceeds %d bytes", b.MaxBytes)
	}
	if err != nil {
		return nil, Errorf(http.StatusBadRequest, "bad-request", "", "read request body: %v", err)
	}
	return data, nil
}

// Decode decodes a JSON body strictly: unknown fields and trailing data
// are errors that name what was wrong.
func (b Bodies) Decode(w http.ResponseWriter, r *http.Request, into any) error {
	data, err := b.Read(w, r)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return Errorf(http.StatusBadRequest, "invalid", jsonErrorField(err), "request body: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return Errorf(http.StatusBadRequest, "invalid", "", "request body: unexpected data after the JSON object")
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
