// Package spec parses and validates Gantry's resource files: YAML or JSON,
// one or more documents, strict about every field. Errors name the file, the
// document (1-based) and the field path.
package spec

import (
	"fmt"
	"strings"
)

// FieldError is one problem with one field.
type FieldError struct {
	File     string
	Document int
	Path     string
	Message  string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Document > 0 {
		fmt.Fprintf(&b, "document %d: ", e.Document)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// ErrorList is every problem found; it is an error when non-empty.
type ErrorList []*FieldError

func (l ErrorList) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// Err returns nil for an empty list, so callers can `return errs.Err()`.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

func (l *ErrorList) add(path, format string, args ...any) {
	*l = append(*l, &FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}

// locate stamps file and document on errors that lack them.
func (l ErrorList) locate(file string, doc int) ErrorList {
	for _, e := range l {
		if e.File == "" {
			e.File = file
		}
		if e.Document == 0 {
			e.Document = doc
		}
	}
	return l
}

func childPath(parent, field string) string {
	if parent == "" {
		return field
	}
	return parent + "." + field
}

func indexPath(parent string, i int) string {
	return fmt.Sprintf("%s[%d]", parent, i)
}
