package decide

import (
	"fmt"

	"github.com/gantry-dev/gantry/planner"
)

// StaleMachines says which machine a list the booking or the scratch
// keeps still points to though it no longer lists it ("": none): past
// the end of the booking's list, in a spare list, or in an entry of the
// scratch's machines that the view the booking keeps does not list (or,
// when it keeps none, past the last view's end). Each such
// pointer keeps a booked machine, and with it the array of every machine
// of its layout, from the collector.
func StaleMachines(b *Booking, s *Scratch) string {
	for i, m := range b.machines[len(b.machines):cap(b.machines)] {
		if m != nil {
			return fmt.Sprintf("the booking's list of %d machines points to %s past its end, at %d", len(b.machines), m.pm.ID, len(b.machines)+i)
		}
	}
	for _, l := range s.spare.machines {
		for _, m := range l[:cap(l)] {
			if m != nil {
				return fmt.Sprintf("a spare list points to %s", m.pm.ID)
			}
		}
	}
	// Without a view kept, the next pass's view overwrites the entries
	// up to its own length: only those past the last view's must be empty.
	listed, from := map[*planner.Machine]bool{}, s.machinesUsed
	if b.view != nil {
		from = 0
		for _, pm := range b.view.byID {
			listed[pm] = true
		}
	}
	all := s.machines[:cap(s.machines)]
	for i := from; i < len(all); i++ {
		if pm := &all[i]; !listed[pm] && pm.Machine != nil {
			return fmt.Sprintf("the scratch's entry %d of %d, in no view, points to %s", i, len(all), pm.ID)
		}
	}
	return ""
}
