package fleet

import (
	"errors"
	"strings"
	"testing"
)

// The reason a machine never joined carries its last boot step and the
// tail of its console, with tokens redacted.
func TestWithConsoleSaysHowFarTheBootGot(t *testing.T) {
	console := "boot...\n[gantry-boot] start\n[gantry-boot] download\ntoken gjt1.abc.def leaked\ncurl: (6) Could not resolve host: downloads.example.com\n"
	msg := WithConsole("did not join within 10m0s", console, nil, 20)
	for _, want := range []string{"did not join within", "last boot step: download", "Could not resolve host", "<redacted>"} {
		if !strings.Contains(msg, want) {
			t.Errorf("reason lacks %q: %q", want, msg)
		}
	}
	if strings.Contains(msg, "gjt1.abc") {
		t.Error("a token from the console reached the reason")
	}
	if msg := WithConsole("x", "", errors.New("boom"), 20); !strings.Contains(msg, "console output unavailable: boom") {
		t.Errorf("without a console: %q", msg)
	}
	if msg := WithConsole("x", "nothing here\n", nil, 20); !strings.Contains(msg, "never ran") {
		t.Errorf("no marker: %q", msg)
	}
}
