package server

import (
	"os"
	"testing"

	"github.com/gantry-dev/gantry/provider/local/localtest"
)

// TestMain lets the test binary stand in for the agents of the local
// machines the tests' servers launch (their agent binary is this one).
func TestMain(m *testing.M) {
	localtest.StandInForAgent()
	os.Exit(m.Run())
}
