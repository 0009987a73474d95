package controller

import (
	"context"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/provisioner/fake"
)

// A provider call runs under the leadership term: when the term ends
// (the lease was lost), a call in flight is cancelled and Run returns,
// rather than the call going on for its ProviderTimeout after another
// server may have begun to lead.
func TestProviderCallsEndWithTheTerm(t *testing.T) {
	e := newEnv(t)
	e.cfg.Calls.ProviderTimeout = 24 * time.Hour
	e.restart()
	e.apply(twoMachines)
	e.fakes["fake"].Hang(fake.OpLaunch, true)
	t.Cleanup(func() { e.fakes["fake"].Hang(fake.OpLaunch, false) })
	term, endTerm := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); e.ctrl.Run(term) }()
	if err := e.fakes["fake"].Await(context.Background(), func() bool { return e.fakes["fake"].InFlight(fake.OpLaunch) == 2 }); err != nil {
		t.Fatal(err)
	}
	endTerm()
	<-ran // without the term's context this waits a day for the hung launches
	launches := e.fakes["fake"].Calls(fake.OpLaunch)
	if len(launches) != 2 || launches[0].Err == nil || launches[1].Err == nil {
		t.Fatalf("launches %+v: want both cancelled", launches)
	}
	// A later term (or TerminateAll on shutdown) calls providers again.
	e.fakes["fake"].Hang(fake.OpLaunch, false)
	e.pass()
	if n := len(e.fakes["fake"].Calls(fake.OpLaunch)); n <= 2 {
		t.Fatalf("no launch after the term ended: %d calls", n)
	}
}
