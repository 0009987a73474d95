package server

import (
	"fmt"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/server/heartbeat"
	"github.com/gantry-dev/gantry/server/secretread"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/target"
)

// kubeReads are the Kubernetes target's reads that need the server: the
// spec a replica runs and the values of its secret env (the server holds
// the key that opens Secrets).
func (s *Server) kubeReads(tx store.Tx) target.KubernetesReads {
	secrets := s.secretReader(tx)
	return target.KubernetesReads{
		SpecOf: func(r *api.Replica) (*api.ServiceSpec, error) { return heartbeat.RevisionSpec(tx, r) },
		SecretEnv: func(sp api.ServiceSpec) (map[string]string, error) {
			_, env, err := secrets.ServiceSecrets(sp)
			if secretread.IsMissing(err) {
				return nil, fmt.Errorf("%w: %v", target.ErrSecretMissing, err)
			}
			return env, err
		},
	}
}
