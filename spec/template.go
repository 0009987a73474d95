package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/gantry-dev/gantry/api"
)

// ResolveSecrets reads each secret referenced from the server's
// environment or files and keeps only its SHA-256 in the spec. The value itself is never stored, logged or
// returned; an error names the field, not the value.
func ResolveSecrets(c *api.Cluster, lookupEnv func(string) (string, bool)) ErrorList {
	var errs ErrorList
	if c.Spec.Monitoring == nil {
		return nil
	}
	for i := range c.Spec.Monitoring.Headers {
		h := &c.Spec.Monitoring.Headers[i]
		if h.SecretRef.Name != "" {
			continue // a Secret's: stamped with its revision by the server
		}
		value, err := ReadSecret(h.SecretRef, lookupEnv)
		if err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				errs.add(indexPath("spec.monitoring.headers", i)+".secretRef"+fe.Path, "%s", fe.Message)
			}
			continue
		}
		sum := sha256.Sum256([]byte(value))
		h.ValueSHA256 = hex.EncodeToString(sum[:])
	}
	return errs
}

// ReadSecret reads a secret on the server: an environment variable, or a
// file (without its trailing newlines). The error names the reference,
// never a value; its Path is ".env" or ".file".
func ReadSecret(ref api.SecretRef, lookupEnv func(string) (string, bool)) (string, error) {
	switch {
	case ref.Env != "":
		v, ok := lookupEnv(ref.Env)
		if !ok {
			return "", &FieldError{Path: ".env", Message: fmt.Sprintf("environment variable %s is not set on the server", ref.Env)}
		}
		return v, nil
	case ref.File != "":
		data, err := os.ReadFile(ref.File)
		if err != nil {
			return "", &FieldError{Path: ".file", Message: fmt.Sprintf("cannot read %s on the server", ref.File)}
		}
		return strings.TrimRight(string(data), "\n"), nil
	}
	return "", &FieldError{Message: "no secret reference (env or file)"}
}

// TemplateHash identifies what a group's machines boot with: the agent,
// monitoring (with secrets by their SHA-256), and the group's labels. A
// machine launched with another hash is rolled.
func TemplateHash(c *api.Cluster, groupID string) string {
	g, _ := c.Group(groupID)
	labels := g.Labels
	var mon *api.Monitoring
	if m := c.Spec.Monitoring; m != nil {
		copied := *m
		copied.Headers = nil
		for _, h := range m.Headers {
			copied.Headers = append(copied.Headers, api.SecretHeader{Name: h.Name, ValueSHA256: h.ValueSHA256})
		}
		mon = &copied
	}
	var data []byte
	var err error
	if mode := c.NetworkMode(); mode != api.NetworkHost {
		// The network mode is a template input; host (the default) leaves
		// the hashes of machines launched before it existed unchanged.
		data, err = json.Marshal(struct {
			Agent      *api.AgentTemplate
			Monitoring *api.Monitoring
			Labels     map[string]string
			Network    string
		}{c.Spec.Agent, mon, labels, mode})
	} else {
		data, err = json.Marshal(struct {
			Agent      *api.AgentTemplate
			Monitoring *api.Monitoring
			Labels     map[string]string
		}{c.Spec.Agent, mon, labels})
	}
	if err != nil {
		panic(fmt.Sprintf("spec: template hash: %v", err)) // plain data always marshals
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}
