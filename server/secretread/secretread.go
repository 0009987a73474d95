// Package secretread opens the store's Secrets: values sealed with the
// server's encryption key, the context binding each to its Secret's name,
// never answered by any call.
package secretread

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

func sealContext(name string) string { return "secret/" + name }

// Seal seals a Secret's values for the store.
func Seal(sealer *auth.Sealer, name string, values map[string]string) (string, error) {
	data, err := json.Marshal(values)
	if err != nil {
		return "", fmt.Errorf("encode secret %s: %w", name, err)
	}
	return sealer.Seal(string(data), sealContext(name)), nil
}

// Opened is a Secret's metadata, revision and values.
type Opened struct {
	Meta     api.ObjectMeta
	Revision string
	Values   map[string]string
}

// Reader opens each Secret once within a transaction.
type Reader struct {
	sealer *auth.Sealer
	tx     store.Tx
	opened map[string]*Opened
}

// New returns a reader of tx's Secrets.
func New(sealer *auth.Sealer, tx store.Tx) *Reader {
	return &Reader{sealer: sealer, tx: tx, opened: map[string]*Opened{}}
}

// MissingError is a Secret, or a key of one, that does not exist: what a
// user is told (a spec naming it is refused, a replica needing it waits).
// Any other error of the reader is the store's, for the caller's
// transaction to fail on (and be run again where it lost a race).
type MissingError struct {
	Name, Key string
}

func (e *MissingError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("secret %q not found (create it with `gantry secret create %s`)", e.Name, e.Name)
	}
	return fmt.Sprintf("secret %q has no key %q", e.Name, e.Key)
}

// IsMissing reports an error that says a Secret or key does not exist.
func IsMissing(err error) bool {
	var missing *MissingError
	return errors.As(err, &missing)
}

// Get opens a Secret; store.ErrNotFound if there is none.
func (r *Reader) Get(name string) (*Opened, error) {
	if o, ok := r.opened[name]; ok {
		return o, nil
	}
	sec, sealed, err := r.tx.GetSecret(name)
	if err != nil {
		return nil, err
	}
	plain, err := r.sealer.Open(sealed, sealContext(name))
	if err != nil {
		return nil, fmt.Errorf("open secret %s: %w", name, err)
	}
	o := &Opened{Meta: sec.Metadata, Values: map[string]string{}}
	if sec.Status != nil {
		o.Revision = sec.Status.Revision
	}
	if err := json.Unmarshal([]byte(plain), &o.Values); err != nil {
		return nil, fmt.Errorf("decode secret %s: %w", name, err)
	}
	r.opened[name] = o
	return o, nil
}

// ServiceSecrets are the revisions of the Secrets a service uses and the
// values of its secret env; an error names the missing Secret or key.
func (r *Reader) ServiceSecrets(sp api.ServiceSpec) (revisions, env map[string]string, err error) {
	revisions = map[string]string{}
	for _, name := range spec.SecretNames(sp) {
		o, err := r.Get(name)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, &MissingError{Name: name}
		}
		if err != nil {
			return nil, nil, err
		}
		revisions[name] = o.Revision
	}
	for k, ref := range sp.SecretEnv {
		v, ok := r.opened[ref.Name].Values[ref.Key]
		if !ok {
			return nil, nil, fmt.Errorf("%s: %w", k, &MissingError{Name: ref.Name, Key: ref.Key})
		}
		if env == nil {
			env = map[string]string{}
		}
		env[k] = v
	}
	return revisions, env, nil
}

// Header is the value ref names: a key of a Secret, or (no Secret named)
// this server's environment or a file.
func (r *Reader) Header(ref api.SecretRef) (string, error) {
	if ref.Name == "" {
		return spec.ReadSecret(ref, os.LookupEnv)
	}
	o, err := r.Get(ref.Name)
	if errors.Is(err, store.ErrNotFound) {
		return "", &MissingError{Name: ref.Name}
	}
	if err != nil {
		return "", err
	}
	v, ok := o.Values[ref.Key]
	if !ok {
		return "", &MissingError{Name: ref.Name, Key: ref.Key}
	}
	return v, nil
}
