package decidetest

import "github.com/gantry-dev/gantry/decide"

// Apply plays a plan back onto the snapshot as the act step and prompt,
// obliging providers would (playback.World.Apply): intents get an
// instance at once, terminations finish at once, warm-pool machines stop
// and start.
func (h *Harness) Apply(p decide.Plan) {
	h.T.Helper()
	h.check(h.World.Apply(p))
}

func (h *Harness) check(err error) {
	h.T.Helper()
	if err != nil {
		h.T.Fatal(err)
	}
}
