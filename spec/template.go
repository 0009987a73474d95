package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/gantry-dev/gantry/api"
)

// ResolveSecrets reads each referenced secret on the server and keeps only
// its SHA-256 in the spec. The value itself is never stored, logged or
// returned; an error names the field, not the value.
func ResolveSecrets(c *api.Cluster, lookupEnv func(string) (string, bool)) ErrorList {
	var errs ErrorList
	if c.Spec.Monitoring == nil {
		return nil
	}
	for i := range c.Spec.Monitoring.Headers {
		h := &c.Spec.Monitoring.Headers[i]
		path := indexPath("spec.monitoring.headers", i) + ".secretRef"
		var value string
		switch {
		case h.SecretRef.Env != "":
			v, ok := lookupEnv(h.SecretRef.Env)
			if !ok {
				errs.add(path+".env", "environment variable %s is not set on the server", h.SecretRef.Env)
				continue
			}
			value = v
		case h.SecretRef.File != "":
			data, err := os.ReadFile(h.SecretRef.File)
			if err != nil {
				errs.add(path+".file", "cannot read %s on the server", h.SecretRef.File)
				continue
			}
			value = strings.TrimRight(string(data), "\n")
		}
		sum := sha256.Sum256([]byte(value))
		h.ValueSHA256 = hex.EncodeToString(sum[:])
	}
	return errs
}

// TemplateHash identifies what a group's machines boot with: the agent,
// monitoring (with secrets by their SHA-256), and the group's labels. A
// machine launched with another hash is rolled.
func TemplateHash(c *api.Cluster, groupID string) string {
	var labels map[string]string
	for _, g := range c.Spec.CapacityGroups {
		if g.GroupID == groupID {
			labels = g.Labels
		}
	}
	var mon *api.Monitoring
	if m := c.Spec.Monitoring; m != nil {
		copied := *m
		copied.Headers = nil
		for _, h := range m.Headers {
			copied.Headers = append(copied.Headers, api.SecretHeader{Name: h.Name, ValueSHA256: h.ValueSHA256})
		}
		mon = &copied
	}
	data, err := json.Marshal(struct {
		Agent      *api.AgentTemplate
		Monitoring *api.Monitoring
		Labels     map[string]string
	}{c.Spec.Agent, mon, labels})
	if err != nil {
		panic(fmt.Sprintf("spec: template hash: %v", err)) // plain data always marshals
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}
