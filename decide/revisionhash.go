package decide

import (
	"maps"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/spec"
)

// keepRevisionHashes are the last pass's revision hashes of the services
// that did not change since, the Secrets' revisions as they were: each
// service that stepped hashed its spec again (its JSON, then SHA-256), a
// fortieth of a pass at 1,000 machines. A service made, changed or
// deleted since is among the changes; the pass consumes the last
// booking's map.
func (p *Pass) keepRevisionHashes() map[string]string {
	prev, changed := p.snap.Booked, p.snap.Changed
	if prev == nil || changed == nil || prev.hashes == nil || !maps.Equal(prev.secrets, p.snap.SecretRevisions) {
		return map[string]string{}
	}
	for name := range changed.Services {
		delete(prev.hashes, name)
	}
	return prev.hashes
}

// revisionHash is the hash of the service's revision now.
func (p *Pass) revisionHash(svc *api.Service) string {
	name := svc.Metadata.Name
	if hash, ok := p.hashes[name]; ok {
		return hash
	}
	hash := spec.RevisionHash(svc.Spec, p.snap.SecretRevisions)
	p.hashes[name] = hash
	return hash
}
