package decide

import (
	"slices"
	"strings"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/planner"
)

// Machines are found by id in the pass's lists by binary search rather
// than in maps built each pass: a map of 50,000 machines cost more to
// build than all of a lone change's lookups.

// findByID is the position of id in list, whose first sorted elements
// are in id order and the rest (machines the pass launched) few.
func findByID[T any](list []T, sorted int, id string, idOf func(T) string) (int, bool) {
	if i, ok := slices.BinarySearchFunc(list[:sorted], id, func(e T, id string) int { return strings.Compare(idOf(e), id) }); ok {
		return i, true
	}
	for i := sorted; i < len(list); i++ {
		if idOf(list[i]) == id {
			return i, true
		}
	}
	return -1, false
}

func apiMachineID(m *api.Machine) string { return m.ID }

// machine is the pass's machine of that id (nil: none).
func (p *Pass) machine(id string) *api.Machine {
	if i, ok := findByID(p.machines, p.sortedMachines, id, apiMachineID); ok {
		return p.machines[i]
	}
	return nil
}

// machine is the view's machine of that id (nil: none).
func (v *view) machine(id string) *planner.Machine {
	if i, ok := v.position(id); ok {
		return v.byID[i]
	}
	return nil
}

// position is the machine's position in byID (and ids).
func (v *view) position(id string) (int, bool) {
	return findByID(v.ids, v.sorted, id, func(id string) string { return id })
}
