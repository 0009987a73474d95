package decide

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/failover"
	"github.com/gantry-dev/gantry/provisioner"
)

// Memory is what the leader remembers between passes. It lives in the
// store, one entry per key, so a server that takes over (or restarts)
// resumes where the last one stopped. Decide reads it and returns the next
// one; the act step writes the difference. Outcomes are the one part
// written elsewhere: the workers that call providers leave their results
// there for the next pass to fold in.
type Memory struct {
	// Desired machine count per group (cluster/group).
	Desired map[string]int `memory:"desired"`
	// Backoff of launches per group after failures.
	Backoff map[string]Backoff `memory:"backoff"`
	// Unavailable offerings (planner.OfferingKey) until when.
	Unavailable map[string]time.Time `memory:"unavailable"`
	// Conditions by cluster/type.
	Conditions map[string]api.Condition `memory:"condition"`
	// Rollouts of machine templates under way, per group.
	Rollouts map[string]Rollout `memory:"rollout"`
	// IdleSince is when each joined machine last became empty.
	IdleSince map[string]time.Time `memory:"idle"`
	// Terminations that failed, per machine, and when to try again.
	Terminations map[string]Retry `memory:"terminate"`
	// Outcomes of provider calls not yet folded in, by id.
	Outcomes map[string]Outcome `memory:"outcome"`
	// Deployments of services, by service.
	Deployments map[string]api.Deployment `memory:"deployment"`
	// Revisions of services, by RevisionKey.
	Revisions map[string]api.Revision `memory:"revision"`
	// Promotions are `gantry rollout promote` requests not yet taken in:
	// the revision hash to promote, by service. Like outcomes, they are
	// written elsewhere (by the API) and consumed by the next pass.
	Promotions map[string]string `memory:"promote"`
	// Failover is each failover group's state, by group.
	Failover map[string]failover.State `memory:"failover"`
	// FailoverRequests are `gantry failover promote|revert` requests not
	// yet taken in, by group (written by the API, like Promotions).
	FailoverRequests map[string]string `memory:"failoverrequest"`
}

// PromotionKey is where the API leaves a promotion request.
func PromotionKey(service string) string { return "promote/" + service }

// DeploymentKey is where a service's deployment is kept.
func DeploymentKey(service string) string { return "deployment/" + service }

// RevisionPrefix is the prefix of a service's revisions in the store.
func RevisionPrefix(service string) string { return revisionsPrefix + service + "/" }

// revisionsPrefix is the prefix of every revision in the store.
const revisionsPrefix = "revision/"

// Backoff is a group's launch backoff.
type Backoff struct {
	Failures int       `json:"failures"`
	Until    time.Time `json:"until"`
}

// Rollout is a template rollout under way in a group.
type Rollout struct {
	Since    time.Time `json:"since"`
	Template string    `json:"template"`
}

// Retry is a machine whose termination failed.
type Retry struct {
	Attempts int       `json:"attempts"`
	Next     time.Time `json:"next"`
	Reported bool      `json:"reported,omitempty"`
}

// Outcome is the result of one provider call, left by the worker that
// made it.
type Outcome struct {
	Call         string                `json:"call"`
	Machine      string                `json:"machine,omitempty"`
	Cluster      string                `json:"cluster,omitempty"`
	Group        string                `json:"group,omitempty"`
	InstanceType string                `json:"instanceType,omitempty"`
	Zone         string                `json:"zone,omitempty"`
	CapacityType string                `json:"capacityType,omitempty"`
	Kind         provisioner.ErrorKind `json:"kind,omitempty"`
	Error        string                `json:"error,omitempty"`
	At           time.Time             `json:"at"`
}

// Failed reports whether the call failed.
func (o Outcome) Failed() bool { return o.Error != "" }

// OutcomeKey is where a worker writes an outcome (id must be unique).
func OutcomeKey(id string) string { return "outcome/" + id }

// ConditionKey names a cluster's condition in memory.
func ConditionKey(cluster, typ string) string { return cluster + "/" + typ }

// NewMemory is an empty memory.
func NewMemory() Memory {
	var m Memory
	for _, sec := range memorySectionTable {
		sec.makeEmpty(&m)
	}
	return m
}

// Clone copies a memory (its maps; the values are plain).
func (m Memory) Clone() Memory {
	c := NewMemory()
	for _, sec := range memorySectionTable {
		sec.clone(&c, &m)
	}
	return c
}

// passMemory is a pass's memory: mem's sections copied, but for the
// large ones (copyOnWrite), which it shares with mem until the pass
// writes them (owned, setEntry). Copying and then comparing every
// service's deployment and revisions took a tenth of a lone change's
// pass at 5,000 services.
func passMemory(mem Memory) Memory {
	var c Memory
	for _, sec := range memorySectionTable {
		if copyOnWrite(sec.name) {
			sec.share(&c, &mem)
		} else {
			sec.clone(&c, &mem)
		}
		sec.makeEmpty(&c) // an empty map only where mem's was empty
	}
	return c
}

// copyOnWrite: the section is shared with the pass's input until the
// pass writes it.
func copyOnWrite(section string) bool {
	switch section {
	case "deployment", "revision", "idle":
		return true
	}
	return false
}

// ownedSections says which of the copy-on-write sections the pass has
// copied (it may write them).
type ownedSections struct{ deployments, revisions, idle bool }

// owned is m to write into: a copy of it the first time.
func owned[V any](m *map[string]V, copied *bool) map[string]V {
	if !*copied {
		c := make(map[string]V, len(*m)+1)
		maps.Copy(c, *m)
		*m, *copied = c, true
	}
	return *m
}

// setEntry writes value at key unless m holds it already (a pass that
// decides the same again does not copy its section).
func setEntry[V any](m *map[string]V, copied *bool, key string, value V) {
	if prior, ok := (*m)[key]; ok && sameEntry(prior, value) {
		return
	}
	owned(m, copied)[key] = value
}

// keepKeysOwned is keepKeys for a copy-on-write section: copied only
// when a key goes.
func keepKeysOwned[V any](m *map[string]V, copied *bool, keep func(string) bool) {
	for k := range *m { // the map ranged over is the one before any copy
		if !keep(k) {
			delete(owned(m, copied), k)
		}
	}
}

// Entries is the memory as the store keeps it: "section/key" → JSON.
func (m Memory) Entries() (map[string]string, error) {
	out := map[string]string{}
	for _, sec := range memorySectionTable {
		err := sec.entries(&m, func(key string, value any) error {
			data, err := json.Marshal(value)
			if err != nil {
				return fmt.Errorf("memory %s/%s: %w", sec.name, key, err)
			}
			out[sec.name+"/"+key] = string(data)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DecodeMemory reads the store's entries; an entry that does not decode
// is an error naming it (entries of unknown sections are left alone).
func DecodeMemory(entries map[string]string) (Memory, error) {
	var d MemoryDecoder
	return d.Decode(entries)
}

// Diff is what to write to go from old to next: entries to put (those
// whose JSON differs) and keys to delete. An entry whose value is deeply
// equal to its old one is not encoded: a pass changes a few of the tens
// of thousands of entries a large fleet's memory holds, and encoding all
// of them twice took a tenth of a pass.
func Diff(old, next Memory) (put map[string]string, del []string, err error) {
	put = map[string]string{}
	for _, sec := range memorySectionTable {
		if err := sec.diff(&old, &next, put, &del); err != nil {
			return nil, nil, err
		}
	}
	return put, del, nil
}

// ChangedKeys calls each with the key of every entry Diff would put or
// delete, and of the few more whose values differ but encode the same
// (a time in another zone): Diff without encoding, for whoever only
// needs to know which entries a pass may have changed (the simulator's
// change notes, where encoding each changed entry twice was 3% of a run).
func ChangedKeys(old, next Memory, each func(key string)) {
	for _, sec := range memorySectionTable {
		sec.changed(&old, &next, each)
	}
}

// MemoryDecoder decodes the store's memory entries pass after pass,
// keeping what it decoded: an entry unchanged since the last decode is
// not decoded again, and the memory it returned last is brought up to
// the entries in place, not built afresh (10,000 entries at 50,000
// machines: building their maps took a tenth of a lone change's pass).
// So a memory it returns holds until the next Decode, and nobody may
// change it (decide never does: it copies the memory, and a value's maps
// before changing them). Its zero value is ready; it is not safe for
// concurrent use.
type MemoryDecoder struct {
	last map[string]decodedEntry
	mem  *Memory
}

type decodedEntry struct {
	raw   string
	value any
}

// Decode is DecodeMemory, from what the last Decode decoded.
func (d *MemoryDecoder) Decode(entries map[string]string) (Memory, error) {
	if d.mem == nil {
		m := NewMemory()
		d.mem, d.last = &m, map[string]decodedEntry{}
	}
	byName := map[string]memorySection{}
	for _, sec := range memorySectionTable {
		byName[sec.name] = sec
	}
	for k, raw := range entries {
		name, key, ok := strings.Cut(k, "/")
		sec, known := byName[name]
		if !ok || !known {
			continue
		}
		if e, kept := d.last[k]; kept && e.raw == raw {
			continue
		}
		v, err := sec.decode(raw)
		if err != nil {
			d.mem, d.last = nil, nil // half brought up: the next decodes afresh
			return NewMemory(), fmt.Errorf("memory entry %s: %w", k, err)
		}
		sec.set(d.mem, key, v)
		d.last[k] = decodedEntry{raw: raw, value: v}
	}
	for k := range d.last {
		if _, ok := entries[k]; !ok {
			name, key, _ := strings.Cut(k, "/")
			byName[name].remove(d.mem, key)
			delete(d.last, k)
		}
	}
	return *d.mem, nil
}

// Equal reports whether two memories hold the same entries.
func (m Memory) Equal(o Memory) bool {
	a, errA := m.Entries()
	b, errB := o.Entries()
	return errA == nil && errB == nil && maps.Equal(a, b)
}
