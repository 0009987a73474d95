package fleet

import (
	"fmt"
	"regexp"

	"github.com/gantry-dev/gantry/provisioner/cloudinit"
)

// tokenLike matches Gantry tokens and credentials, redacted from console
// output before it goes into an event.
var tokenLike = regexp.MustCompile(`g(jt|mc|at)1\.[A-Za-z0-9._~+/=-]+`)

// WithConsole adds to why a machine never joined the last boot step its
// console printed and the console's last tailLines lines, tokens
// redacted; consoleErr says why there is no console to show.
func WithConsole(why, console string, consoleErr error, tailLines int) string {
	if consoleErr != nil {
		return why + fmt.Sprintf("; console output unavailable: %v", consoleErr)
	}
	console = tokenLike.ReplaceAllString(console, "<redacted>")
	step := cloudinit.LastMarker(console)
	if step == "" {
		step = "none (the boot script never ran)"
	}
	return fmt.Sprintf("%s; last boot step: %s; console tail:\n%s", why, step, cloudinit.Tail(console, tailLines))
}
