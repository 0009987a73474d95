package view

import (
	"github.com/gantry-dev/gantry/api"
)

// interner keeps one copy of the strings hundreds of thousands of
// replicas repeat: their service, cluster, revision hash and machines.
// Decoded from JSON, each replica held its own copies (about 150 bytes
// each, 75 MB at 500,000 replicas), and every comparison of two equal
// ones read both; shared, they compare by pointer. Strings no object
// uses any more (machines gone, revisions replaced) are dropped when the
// table has doubled since it was last rebuilt from the view's objects.
type interner struct {
	strs map[string]string
	// base is the table's size when it was last rebuilt.
	base int
}

func (in *interner) of(s string) string {
	if s == "" {
		return s
	}
	if c, ok := in.strs[s]; ok {
		return c
	}
	if in.strs == nil {
		in.strs = map[string]string{}
	}
	in.strs[s] = s
	return s
}

// replicaStrings and machineStrings are the fields the view shares.
func replicaStrings(r *api.Replica) []*string {
	return []*string{&r.Service, &r.Cluster, &r.SpecHash, &r.Machine, &r.PreviousMachine}
}

func machineStrings(m *api.Machine) []*string {
	return []*string{&m.ID, &m.Cluster, &m.Group, &m.Zone}
}

func (in *interner) replica(r *api.Replica) {
	if r != nil {
		in.share(replicaStrings(r))
	}
}

func (in *interner) machine(m *api.Machine) {
	if m != nil {
		in.share(machineStrings(m))
	}
}

// share points each field at the table's copy.
func (in *interner) share(fields []*string) {
	for _, f := range fields {
		*f = in.of(*f)
	}
}

// keep adds the fields' strings to the table as they are.
func (in *interner) keep(fields []*string) {
	for _, f := range fields {
		if *f != "" {
			in.strs[*f] = *f
		}
	}
}

// outgrown: the table has doubled since it was last rebuilt.
func (in *interner) outgrown() bool { return len(in.strs) > 2*in.base+1024 }

// compacted is a table of the strings the objects hold now. It only
// reads them: readers share the objects.
func compacted(machines map[string]*api.Machine, replicas map[string]*api.Replica) interner {
	in := interner{strs: make(map[string]string, len(machines))}
	for _, m := range machines {
		in.keep(machineStrings(m))
	}
	for _, r := range replicas {
		in.keep(replicaStrings(r))
	}
	in.base = len(in.strs)
	return in
}
