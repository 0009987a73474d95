package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Machines made by the exec provider with the example script (agent
// processes on this host) join, run replicas that answer, and go away.
func TestExecProviderMachinesJoinAndServe(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	dir := t.TempDir()
	machines := filepath.Join(dir, "machines")
	t.Cleanup(func() { killScriptMachines(machines) })
	config := scriptExecConfig(t, dir, machines)
	s := startServer(t, filepath.Join(dir, "server"), "--local-exit-with-server", "--exec-config", config)
	// minSize 0: the machines come from the replicas' demand, which the
	// server plans with the runtime the exec config names.
	execWeb := strings.NewReplacer("capacityGroups:", "provider: {name: exec}\n  network: {mode: host}\n  capacityGroups:", "local.medium", "pm.medium", "minSize: 2", "minSize: 0").Replace(webSpec)
	s.apply(t, "web.yaml", execWeb)
	waitFor(t, "3 replicas answering on exec machines", func() (bool, string) { return allAnswer(s.replicas("web"), 3) })
	for _, m := range s.machines() {
		if m.Provider != "exec" || !strings.HasPrefix(m.ProviderID, "pm-") {
			t.Errorf("machine %s: provider %s id %s", m.ID, m.Provider, m.ProviderID)
		}
	}
	out, errOut, code := s.gantry("delete", "service", "web")
	if code != 0 {
		t.Fatalf("delete service: %s %s", out, errOut)
	}
	if _, errOut, code := s.gantry("delete", "cluster", "e2e"); code != 0 {
		t.Fatalf("delete cluster: %s", errOut)
	}
	waitFor(t, "exec machines terminated by the script", func() (bool, string) {
		states, _ := filepath.Glob(filepath.Join(machines, "pm-*", "state"))
		for _, f := range states {
			data, _ := os.ReadFile(f)
			if strings.TrimSpace(string(data)) != "terminated" {
				return false, f + " is " + string(data)
			}
		}
		return len(states) >= 1, fmt.Sprintf("%d machines", len(states))
	})
}

func killScriptMachines(dir string) {
	pids, _ := filepath.Glob(filepath.Join(dir, "pm-*", "pid"))
	for _, f := range pids {
		data, _ := os.ReadFile(f)
		var pid int
		if _, err := fmt.Sscan(string(data), &pid); err == nil && pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}

// scriptExecConfig writes an exec provider config whose machines are made
// by the example script in the machines directory.
func scriptExecConfig(t *testing.T, dir, machines string) string {
	t.Helper()
	script, err := filepath.Abs("../examples/exec/process-machines.sh")
	if err != nil {
		t.Fatal(err)
	}
	run := fmt.Sprintf("MACHINES_DIR=%s GANTRY_BIN=%s %s", machines, gantryBin, script)
	return writeFile(t, dir, "exec.yaml", fmt.Sprintf(`commands:
  launch: %[1]s launch
  terminate: %[1]s terminate
  describe: %[1]s describe
  list: %[1]s list
  console: %[1]s console
timeout: 30s
runtime: process
zones: [here]
flatPrice: 0.02
instanceTypes:
  - {name: pm.medium, milliCpu: 2000, memoryBytes: 2147483648}
`, run))
}
