package decide

// What a booking tells of how its pass went: the decision harness and
// the benchmarks read it to show which shortcut a pass took.

// ReusedCapacity reports whether the pass took the last pass's
// scheduling and plan instead of making its own (quietcapacity.go).
func (b *Booking) ReusedCapacity() bool { return b != nil && b.reused }

// ReusedScheduling reports whether the pass took the last pass's
// scheduling but planned afresh, the plan's deadline come.
func (b *Booking) ReusedScheduling() bool { return b != nil && b.reusedScheduling }

// KeptTallies is how many services' steps took the last pass's tally of
// their replicas, counted again for what changed, instead of walking
// them (deploytally.go).
func (b *Booking) KeptTallies() int {
	if b == nil {
		return 0
	}
	return b.keptTallies
}

// PatchedView reports whether the pass patched the last pass's view
// instead of copying every machine into one of its own (patchableView).
func (b *Booking) PatchedView() bool { return b != nil && b.patched }

// PatchedSplicedView reports whether the view the pass patched was of
// other machines, those made and deleted since spliced in and out
// (patchableView).
func (b *Booking) PatchedSplicedView() bool { return b != nil && b.patched && b.spliced }

// PartlyWalkedView reports whether the pass walked only the entries of
// its view whose idle times or candidacy could have changed since the
// last pass walked them (placesToWalk).
func (b *Booking) PartlyWalkedView() bool { return b != nil && b.partlyWalked }

// BookedTouched reports whether the pass booked only the machines a
// change touched, with no walk of the others (patchesInPlace).
func (b *Booking) BookedTouched() bool { return b != nil && b.touchedOnly }

// PatchedPlacingView reports whether the view the pass patched was of a
// pass that placed replicas, its changed entries put back as booked.
func (b *Booking) PatchedPlacingView() bool { return b != nil && b.patched && b.restored }
