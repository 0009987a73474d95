package view

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/gantry-dev/gantry/api"
)

// Strings no object holds any more leave the table once it has doubled;
// the strings the objects hold stay, as the same copies.
func TestInternerDropsStringsNoObjectHolds(t *testing.T) {
	var in interner
	m := &api.Machine{ID: "m-1", Cluster: "c", Group: "g", Zone: "a"}
	r := &api.Replica{ID: "web-0", Service: "web", Cluster: "c", SpecHash: "abc", Machine: "m-1"}
	in.machine(m)
	in.replica(r)
	in.base = len(in.strs)
	for i := 0; !in.outgrown(); i++ {
		in.machine(&api.Machine{ID: fmt.Sprintf("gone-%d", i)})
	}
	next := compacted(map[string]*api.Machine{m.ID: m}, map[string]*api.Replica{r.ID: r})
	if len(next.strs) != 6 || next.outgrown() {
		t.Fatalf("compacted table holds %d strings, want the 6 the objects hold: %v", len(next.strs), next.strs)
	}
	for _, s := range []string{m.ID, m.Cluster, m.Group, m.Zone, r.Service, r.SpecHash} {
		if unsafe.StringData(next.of(s)) != unsafe.StringData(s) {
			t.Fatalf("%q is a new copy after compaction", s)
		}
	}
	if unsafe.StringData(r.Machine) != unsafe.StringData(m.ID) {
		t.Fatal("the replica's machine and the machine's id are two copies")
	}
}
