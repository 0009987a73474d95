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
	replicas map[string]frozenReplica
	services map[string]string
	clusters map[string]string
	memory   map[string]string
	// machines are encoded without their heartbeats, as a server's view
	// logs them (heartbeats held in memory are not changes).
	machines map[string]string
}

type frozenReplica struct {
	encoded string
	was     decide.ReplicaWas
}

func freeze(t testing.TB, snap *decide.Snapshot, mem decide.Memory) *frozenObjects {
	t.Helper()
	entries, err := mem.Entries()
	if err != nil {
		t.Fatalf("encoding the memory: %v", err)
	}
	f := &frozenObjects{replicas: make(map[string]frozenReplica, len(snap.Replicas)), services: map[string]string{},
		clusters: map[string]string{}, memory: entries, machines: make(map[string]string, len(snap.Machines))}
	for _, m := range snap.Machines {
		quiet := *m
		quiet.LastHeartbeat = nil
		f.machines[m.ID] = encode(t, &quiet)
	}
	for _, r := range snap.Replicas {
		f.replicas[r.ID] = frozenReplica{encoded: encode(t, r), was: decide.ReplicaWas{Service: r.Service, Machine: r.Machine}}
	}
	for _, s := range snap.Services {
		f.services[s.Metadata.Name] = encode(t, s)
	}
	for name, c := range snap.Clusters {
		f.clusters[name] = encode(t, c)
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
	c := &decide.Changes{Replicas: map[string]decide.ReplicaWas{}, Services: changedKeys(f.services, now.services),
		Clusters: changedKeys(f.clusters, now.clusters), Memory: changedKeys(f.memory, now.memory), Machines: changedKeys(f.machines, now.machines)}
	for id, was := range f.replicas {
		if is, ok := now.replicas[id]; !ok || is.encoded != was.encoded {
			c.Replicas[id] = was.was
		}
	}
	for id, is := range now.replicas {
		if _, ok := f.replicas[id]; !ok {
			c.Replicas[id] = decide.ReplicaWas{Service: is.was.Service}
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
