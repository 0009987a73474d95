package provisioner

import (
	"errors"
	"fmt"
)

// ErrorKind classifies provider failures so callers react by kind, not by
// message.
type ErrorKind string

// Error kinds.
const (
	KindInsufficientCapacity ErrorKind = "insufficient-capacity"
	KindAuth                 ErrorKind = "auth"
	KindTransport            ErrorKind = "transport"
	KindUnsupported          ErrorKind = "unsupported"
	KindNotFound             ErrorKind = "not-found"
	KindInvalid              ErrorKind = "invalid"
	// KindForbidden: the credentials are good but may not do this.
	KindForbidden ErrorKind = "forbidden"
	// KindConflict: the object changed or exists already.
	KindConflict ErrorKind = "conflict"
)

// Sentinels to test with errors.Is.
var (
	ErrInsufficientCapacity = &Error{Kind: KindInsufficientCapacity}
	ErrAuth                 = &Error{Kind: KindAuth}
	ErrTransport            = &Error{Kind: KindTransport}
	ErrUnsupported          = &Error{Kind: KindUnsupported}
	ErrNotFound             = &Error{Kind: KindNotFound}
	ErrInvalid              = &Error{Kind: KindInvalid}
	ErrForbidden            = &Error{Kind: KindForbidden}
	ErrConflict             = &Error{Kind: KindConflict}
)

// Error is a typed provider failure.
type Error struct {
	Kind ErrorKind
	Op   string
	Err  error
}

// Errorf builds a typed error.
func Errorf(kind ErrorKind, op, format string, args ...any) *Error {
	return &Error{Kind: kind, Op: op, Err: fmt.Errorf(format, args...)}
}

func (e *Error) Error() string {
	switch {
	case e.Op != "" && e.Err != nil:
		return fmt.Sprintf("%s: %s: %v", e.Op, e.Kind, e.Err)
	case e.Err != nil:
		return fmt.Sprintf("%s: %v", e.Kind, e.Err)
	}
	return string(e.Kind)
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches any *Error of the same kind, so errors.Is(err, ErrNotFound)
// works through wrapping.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Kind == e.Kind
}

// KindOf returns the kind of a provider error, or "" for an untyped one.
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}
