package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/gantry-dev/gantry/api"
)

// RevisionHash identifies a revision of a service: every field except the
// replica count, the update policy and the exposed ports, and the revisions of the Secrets
// it uses (secretRevisions, by name). A change is a new revision, which a
// deployment rolls out.
func RevisionHash(s api.ServiceSpec, secretRevisions map[string]string) string {
	s = Template(s)
	data, _ := json.Marshal(s)
	for _, name := range SecretNames(s) {
		data = fmt.Appendf(data, "\x00%s=%s", name, secretRevisions[name])
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// Template is the part of a spec a revision keeps: all but the replica
// count, the update policy and the exposed ports.
func Template(s api.ServiceSpec) api.ServiceSpec {
	s.Replicas = nil
	s.Update = api.UpdatePolicy{}
	s.Expose = nil
	return s
}

// WithTemplate is current with the template of a revision: its replica
// count, update policy and exposed ports stay.
func WithTemplate(current, revision api.ServiceSpec) api.ServiceSpec {
	revision.Replicas, revision.Update, revision.Expose = current.Replicas, current.Update, current.Expose
	return revision
}
