package decide

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"time"
	"unsafe"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/failover"
)

// memorySection is one of Memory's maps, typed: copying, comparing and
// decoding a large fleet's memory (tens of thousands of entries) through
// reflection on every pass took a sixth of a lone change's pass.
type memorySection struct {
	// name is the section's key prefix in the store (its field's tag).
	name string
	// makeEmpty gives m an empty map of the section where it has none.
	makeEmpty func(m *Memory)
	// clone copies src's map into dst; share gives dst src's map.
	clone func(dst, src *Memory)
	share func(dst, src *Memory)
	// entries encodes each entry of m's map, by key.
	entries func(m *Memory, each func(key string, value any) error) error
	// diff adds to put the entries of next that differ from old, and to
	// del the keys of old that next does not hold.
	diff func(old, next *Memory, put map[string]string, del *[]string) error
	// changed calls each with the key of every entry of next not deeply
	// equal to old's, and of every key of old that next does not hold.
	changed func(old, next *Memory, each func(key string))
	// decode decodes an entry's JSON.
	decode func(raw string) (any, error)
	// set sets a decoded entry in m (value from decode); remove drops one.
	set    func(m *Memory, key string, value any)
	remove func(m *Memory, key string)
}

// memorySectionTable is Memory's sections, built once and only read: building
// them (a closure each for every operation of every section) on every
// pass was a third of a simulated day's allocations.
var memorySectionTable = memorySections()

// memorySections are Memory's sections, in its fields' order (a test
// checks them against the fields' tags).
func memorySections() []memorySection {
	return []memorySection{
		section("desired", func(m *Memory) *map[string]int { return &m.Desired }),
		section("backoff", func(m *Memory) *map[string]Backoff { return &m.Backoff }),
		section("unavailable", func(m *Memory) *map[string]time.Time { return &m.Unavailable }),
		section("condition", func(m *Memory) *map[string]api.Condition { return &m.Conditions }),
		section("rollout", func(m *Memory) *map[string]Rollout { return &m.Rollouts }),
		section("idle", func(m *Memory) *map[string]time.Time { return &m.IdleSince }),
		section("terminate", func(m *Memory) *map[string]Retry { return &m.Terminations }),
		section("outcome", func(m *Memory) *map[string]Outcome { return &m.Outcomes }),
		section("deployment", func(m *Memory) *map[string]api.Deployment { return &m.Deployments }),
		section("revision", func(m *Memory) *map[string]api.Revision { return &m.Revisions }),
		section("promote", func(m *Memory) *map[string]string { return &m.Promotions }),
		section("failover", func(m *Memory) *map[string]failover.State { return &m.Failover }),
		section("failoverrequest", func(m *Memory) *map[string]string { return &m.FailoverRequests }),
	}
}

func section[V any](name string, field func(*Memory) *map[string]V) memorySection {
	return memorySection{
		name: name,
		makeEmpty: func(m *Memory) {
			if *field(m) == nil {
				*field(m) = map[string]V{}
			}
		},
		clone: func(dst, src *Memory) {
			// Copied into a map of its size, not cloned: a clone keeps the
			// room of every entry the map once held, and a section that
			// is emptied each pass (outcome) held one for each machine of
			// a fleet's launch, cloned (and cleared) on every pass after.
			if m := *field(src); len(m) > 0 {
				c := make(map[string]V, len(m))
				maps.Copy(c, m)
				*field(dst) = c
			}
		},
		share: func(dst, src *Memory) {
			if m := *field(src); m != nil {
				*field(dst) = m
			}
		},
		entries: func(m *Memory, each func(string, any) error) error {
			for k, v := range *field(m) {
				if err := each(k, v); err != nil {
					return err
				}
			}
			return nil
		},
		diff: func(old, next *Memory, put map[string]string, del *[]string) error {
			return diffSection(name, *field(old), *field(next), put, del)
		},
		changed: func(old, next *Memory, each func(string)) {
			changedSection(name, *field(old), *field(next), each)
		},
		decode: func(raw string) (any, error) {
			var v V
			err := json.Unmarshal([]byte(raw), &v)
			return v, err
		},
		set:    func(m *Memory, key string, value any) { (*field(m))[key] = value.(V) },
		remove: func(m *Memory, key string) { delete(*field(m), key) },
	}
}

// diffSection is Diff for one section. An entry deeply equal to its old
// one is not encoded; one that is not is compared by its JSON, which may
// be the same (times in other zones).
func diffSection[V any](name string, old, next map[string]V, put map[string]string, del *[]string) error {
	if sameMap(old, next) { // a section the pass did not write shares its input's map
		return nil
	}
	for key, value := range next {
		prior, had := old[key]
		if had && sameEntry(prior, value) {
			continue
		}
		data, err := json.Marshal(value)
		if err != nil {
			return fmt.Errorf("memory %s/%s: %w", name, key, err)
		}
		if had {
			if same, err := json.Marshal(prior); err == nil && string(same) == string(data) {
				continue
			}
		}
		put[name+"/"+key] = string(data)
	}
	for key := range old {
		if _, ok := next[key]; !ok {
			*del = append(*del, name+"/"+key)
		}
	}
	return nil
}

// changedSection is ChangedKeys for one section.
func changedSection[V any](name string, old, next map[string]V, each func(string)) {
	if sameMap(old, next) {
		return
	}
	for key, value := range next {
		if prior, had := old[key]; !had || !sameEntry(prior, value) {
			each(name + "/" + key)
		}
	}
	for key := range old {
		if _, ok := next[key]; !ok {
			each(name + "/" + key)
		}
	}
}

// sameEntry: a and b are deeply equal. A function of its own so that
// the entries diffSection copies out of its maps stay on its stack: taken
// by address for reflect there, each of 10,000 revisions was copied to
// the heap every pass.
func sameEntry[V any](a, b V) bool {
	return sameBits(&a, &b) || deepEqual(a, b)
}

func deepEqual[V any](a, b V) bool { return reflect.DeepEqual(&a, &b) }

// sameMap: a and b are the same map (or both nil).
func sameMap[V any](a, b map[string]V) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// sameBits: a and b are the same bytes (the same numbers, and strings,
// maps and slices that point to the same memory), so deeply equal. An
// entry the pass did not touch is its input's copy, bit for bit: a
// deployment's map of 100 times compared entry by entry through
// reflection cost a large fleet's pass tens of milliseconds. Not the same
// bytes says nothing (DeepEqual then decides).
func sameBits[V any](a, b *V) bool {
	n := int(unsafe.Sizeof(*a))
	return unsafe.String((*byte)(unsafe.Pointer(a)), n) == unsafe.String((*byte)(unsafe.Pointer(b)), n)
}
