// Package localtest helps tests whose servers launch local machines:
// the local provider starts its agents from the server's own executable,
// which in a test is the test binary.
package localtest

import (
	"os"
	"os/signal"
	"syscall"
)

// StandInForAgent makes a test binary started as `<binary> agent …` (the
// local provider's agents, argv[1] "agent" as the real one's) idle until
// stopped, then exit, instead of running the package's tests: given
// arguments it does not know, the test binary runs every test, as a child
// of the test that launched the machine, leaving the temporary
// directories of whatever it ran when stopped. Call it first in TestMain.
func StandInForAgent() {
	if len(os.Args) < 2 || os.Args[1] != "agent" {
		return
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	os.Exit(0)
}
