package fleet

import (
	"context"
	"fmt"
	"regexp"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/cloudinit"
)

// tokenLike matches Gantry tokens and credentials, redacted from console
// output before it goes into an event.
var tokenLike = regexp.MustCompile(`g(jt|mc|at)1\.[A-Za-z0-9._~+/=-]+`)

// joinTimeoutReason says why a machine is replaced for not joining: with
// the last boot step it printed and the tail of its console, where the
// provider can fetch them.
func (f *Fleet) joinTimeoutReason(ctx context.Context, m *api.Machine) string {
	reason := fmt.Sprintf("did not join within %s", f.cfg.JoinTimeout)
	prov, ok := f.providerOf(m)
	if !ok || m.ProviderID == "" {
		return reason
	}
	reader, ok := prov.(provisioner.ConsoleReader)
	if !ok {
		return reason
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.ProviderTimeout)
	defer cancel()
	console, err := reader.ConsoleOutput(ctx, m.ProviderID)
	if err != nil {
		return reason + fmt.Sprintf("; console output unavailable: %v", err)
	}
	console = tokenLike.ReplaceAllString(console, "<redacted>")
	step := cloudinit.LastMarker(console)
	if step == "" {
		step = "none (the boot script never ran)"
	}
	return fmt.Sprintf("%s; last boot step: %s; console tail:\n%s", reason, step, cloudinit.Tail(console, f.cfg.ConsoleTailLines))
}
