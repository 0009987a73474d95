package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/gantry-dev/gantry/api"
)

// RuntimeHash identifies what a replica runs: every service field except
// the replica count and placement. A change restarts the replicas.
func RuntimeHash(s api.ServiceSpec) string {
	s.Replicas = nil
	s.Placement = api.Placement{}
	data, _ := json.Marshal(s)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}
