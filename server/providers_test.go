package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const execBase = `commands: {launch: "true", terminate: "true"}
instanceTypes: [{name: t, milliCpu: 1000, memoryBytes: 1073741824}]
flatPrice: 0.01
`

// The exec provider's machines offer the runtime its settings name, with
// or without an agent block: the planner needs it before any agent
// reports, or demand never launches a machine.
func TestExecRuntimeReachesThePlanner(t *testing.T) {
	cases := map[string]struct{ extra, want string }{
		"default":              {"", "docker"},
		"runtime alone":        {"runtime: process\n", "process"},
		"agent block's":        {"agent: {runtime: process}\n", "process"},
		"both, agreeing":       {"runtime: process\nagent: {runtime: process}\n", "process"},
		"runtime, agent block": {"runtime: process\nagent: {extraArgs: [--verbose]}\n", "process"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "exec.yaml")
			if err := os.WriteFile(path, []byte(execBase+c.extra), 0o600); err != nil {
				t.Fatal(err)
			}
			_, runtime, err := loadExec(path, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			entries := BuiltinProviders(Instances{ExecRuntime: runtime})
			for _, e := range entries {
				if e.Name == "exec" && (len(e.Runtimes) != 1 || e.Runtimes[0] != c.want) {
					t.Fatalf("exec machines offer %v, want [%s]", e.Runtimes, c.want)
				}
			}
		})
	}
	for extra, want := range map[string]string{
		"runtime: kata\n": "runtime: want docker or process",
		"runtime: process\nagent: {runtime: docker}\n": "disagree",
	} {
		path := filepath.Join(t.TempDir(), "exec.yaml")
		if err := os.WriteFile(path, []byte(execBase+extra), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := loadExec(path, t.TempDir()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", extra, err, want)
		}
	}
}
