package decidetest

import (
	"encoding/json"
	"testing"

	"github.com/gantry-dev/gantry/decide"
)

// frozenObjects are the objects a pass was handed, as they were: tests
// change the snapshot's objects in place between passes, so the harness
// finds what changed (decide.Changes, as a server's view logs it) by
// comparing them with their encodings.
type frozenObjects struct {
	replicas  map[string]frozenReplica
	services  map[string]string
	clusters  map[string]string
	revisions map[string]string
}

type frozenReplica struct {
	encoded string
	machine string
}

func freeze(t testing.TB, snap *decide.Snapshot, mem decide.Memory) *frozenObjects {
	t.Helper()
	f := &frozenObjects{replicas: make(map[string]frozenReplica, len(snap.Replicas)), services: map[string]string{},
		clusters: map[string]string{}, revisions: map[string]string{}}
	for _, r := range snap.Replicas {
		f.replicas[r.ID] = frozenReplica{encoded: encode(t, r), machine: r.Machine}
	}
	for _, s := range snap.Services {
		f.services[s.Metadata.Name] = encode(t, s)
	}
	for name, c := range snap.Clusters {
		f.clusters[name] = encode(t, c)
	}
	for key, rev := range mem.Revisions {
		f.revisions[key] = encode(t, rev)
	}
	return f
}

func encode(t testing.TB, v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encoding %T: %v", v, err)
	}
	return string(data)
}

// changes is what changed since the objects were frozen (nil: nothing
// was frozen).
func (f *frozenObjects) changes(t testing.TB, snap *decide.Snapshot, mem decide.Memory) *decide.Changes {
	if f == nil {
		return nil
	}
	now := freeze(t, snap, mem)
	c := &decide.Changes{Replicas: map[string]string{}, Services: changedKeys(f.services, now.services),
		Clusters: changedKeys(f.clusters, now.clusters), Revisions: changedKeys(f.revisions, now.revisions)}
	for id, was := range f.replicas {
		if is, ok := now.replicas[id]; !ok || is.encoded != was.encoded {
			c.Replicas[id] = was.machine
		}
	}
	for id := range now.replicas {
		if _, ok := f.replicas[id]; !ok {
			c.Replicas[id] = ""
		}
	}
	return c
}

func changedKeys(was, is map[string]string) map[string]bool {
	out := map[string]bool{}
	for k, v := range was {
		if is[k] != v {
			out[k] = true
		}
	}
	for k := range is {
		if _, ok := was[k]; !ok {
			out[k] = true
		}
	}
	return out
}
