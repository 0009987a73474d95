package decide

import (
	"fmt"
	"sort"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/spec"
)

// RevisionKey names a service's revision in memory.
func RevisionKey(service, hash string) string { return service + "/" + hash }

// Revert returns a service whose deployment failed to the template of
// its last good revision (the act step writes it, unless the service
// changed since this pass read it).
type Revert struct {
	Service    string
	Generation int64
	To         api.Revision
	// Failed is the number of the revision that failed, and why.
	Failed int64
	Reason string
}

// currentRevision is the revision the service's spec asks for: the one
// being deployed, an older one returned to (it takes the next number, as
// with kubectl), or a new one.
func (p *Pass) currentRevision(svc *api.Service, replicas []*api.Replica) api.Revision {
	name := svc.Metadata.Name
	hash := p.revisionHash(svc)
	key := RevisionKey(name, hash)
	rev, known := p.mem.Revisions[key]
	d, had := p.mem.Deployments[name]
	if known && had && d.Revision == hash {
		return rev
	}
	revisions := p.revisionsOf(name)
	last := api.Revision{}
	if n := len(revisions); n > 0 {
		last = revisions[n-1]
	}
	switch {
	case known:
		rev.Cause = fmt.Sprintf("revision %d again (undo, or its spec applied)", rev.Number)
		if had && d.State == api.DeployFailed && d.Stable == hash {
			rev.Cause = fmt.Sprintf("revert of revision %d: %s", d.Number, d.Reason)
		}
		rev.Failed, rev.CreatedAt = "", p.now // a new number, made now
	default:
		rev = api.Revision{Service: name, Hash: hash, Spec: spec.Template(svc.Spec), CreatedAt: p.now, Cause: "apply"}
		if last.Number > 0 && svc.Spec.RestartedAt != last.Spec.RestartedAt {
			rev.Cause = "restart"
		}
	}
	if rev.Number == 0 || rev.Number != last.Number {
		rev.Number = last.Number + 1
	}
	rev.Generation = svc.Metadata.Generation
	if !known {
		p.indexRevision(name, key)
	}
	setEntry(&p.mem.Revisions, &p.owns.revisions, key, rev)
	p.pruneRevisions(svc, rev, replicas)
	return rev
}

// revisionsOf is a service's revisions, oldest first.
func (p *Pass) revisionsOf(service string) []api.Revision {
	var out []api.Revision
	for _, key := range p.revisionKeys()[service] {
		if r, ok := p.mem.Revisions[key]; ok { // not pruned since
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out
}

// revisionKeys indexes the memory's revisions by service, once a pass
// needs it: scanning every service's revisions for each service that
// changed took a third of a pass after 1,000 of 5,000 services changed.
// Keys stay listed once pruned; revisionsOf skips them.
func (p *Pass) revisionKeys() map[string][]string {
	if p.revisionIndex == nil {
		p.revisionIndex = make(map[string][]string, len(p.snap.Services))
		for key, r := range p.mem.Revisions {
			p.revisionIndex[r.Service] = append(p.revisionIndex[r.Service], key)
		}
	}
	return p.revisionIndex
}

// indexRevision lists a revision new to the memory.
func (p *Pass) indexRevision(service, key string) {
	if p.revisionIndex != nil {
		p.revisionIndex[service] = append(p.revisionIndex[service], key)
	}
}

// pruneRevisions keeps the current revision, the newest others up to
// the update policy's history (the last good one always among them), and
// any a replica still runs.
func (p *Pass) pruneRevisions(svc *api.Service, current api.Revision, replicas []*api.Replica) {
	name := svc.Metadata.Name
	running := map[string]bool{}
	for _, r := range replicas {
		running[r.SpecHash] = true
	}
	stable := p.mem.Deployments[name].Stable
	history := svc.Spec.Update.History()
	revisions := p.revisionsOf(name)
	kept := 0
	for i := len(revisions) - 1; i >= 0; i-- {
		r := revisions[i]
		switch {
		case r.Hash == current.Hash:
		case r.Hash == stable || kept < history:
			kept++
		case !running[r.Hash]:
			delete(owned(&p.mem.Revisions, &p.owns.revisions), RevisionKey(name, r.Hash))
		}
	}
}
