package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/gantry-dev/gantry/api"
)

// RuntimeHash identifies what a replica runs: every service field except
// the replica count and placement, and the revisions of the Secrets it
// uses (secretRevisions, by name). A change restarts the replicas.
func RuntimeHash(s api.ServiceSpec, secretRevisions map[string]string) string {
	s.Replicas = nil
	s.Placement = api.Placement{}
	data, _ := json.Marshal(s)
	for _, name := range SecretNames(s) {
		data = fmt.Appendf(data, "\x00%s=%s", name, secretRevisions[name])
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}
