package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

const debugSpec = `kind: Cluster
metadata: {name: dbg}
spec:
  capacityGroups:
    - {groupId: general, instanceType: local.medium, minSize: 1, maxSize: 1}
  systemReserved: {cpu: 100m, memory: 128Mi}
---
kind: Service
metadata: {name: web}
spec:
  cluster: dbg
  command: [gantry, hello]
  env: {GREETING: from the replica}
  ports: [{name: http}]
  resources: {cpu: 100m, memory: 64Mi}
---
kind: Service
metadata: {name: crashy}
spec:
  cluster: dbg
  command: [sh, -c, 'echo "instance $(cat /proc/sys/kernel/random/uuid)"; sleep 1; exit 1']
  resources: {cpu: 100m, memory: 32Mi}
`

// A day's debugging through the built binary and real agents: a
// crashed replica's previous output, a command run in a replica (its
// stdin, output and exit status), a service's logs prefixed, and a port
// forwarded to a replica through the server.
func TestDebugAReplicaFromTheCLI(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	s := startServer(t, t.TempDir(), "--local-exit-with-server")
	if _, errOut, code := s.gantry("apply", "-f", writeFile(t, s.dataDir, "debug.yaml", debugSpec)); code != 0 {
		t.Fatalf("apply: %s", errOut)
	}
	waitFor(t, "web-0 running and crashy-0 restarted", func() (bool, string) {
		web, crashy := s.replicas("web"), s.replicas("crashy")
		ok := len(web) == 1 && web[0].State == "running" && len(crashy) == 1 && crashy[0].Restarts >= 1
		return ok, fmt.Sprintf("%+v %+v", web, crashy)
	})

	previous, errOut, code := s.gantry("logs", "crashy-0", "--previous")
	current, _, _ := s.gantry("logs", "crashy-0")
	if code != 0 || !strings.HasPrefix(previous, "instance ") || previous == current {
		t.Fatalf("logs --previous: exit %d %q %s (current %q): want the instance before the latest start", code, previous, errOut, current)
	}

	cmd := exec.Command(gantryBin, "--data-dir", s.dataDir, "exec", "-i", "web-0", "--", "sh", "-c", `echo "$GANTRY_REPLICA $GREETING"; cat; exit 4`)
	cmd.Stdin = strings.NewReader("typed in\n")
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !asExit(err, &exit) || exit.ExitCode() != 4 || string(out) != "web-0 from the replica\ntyped in\n" {
		t.Fatalf("exec: %v %q, want exit 4 and the replica's environment and stdin echoed", err, out)
	}
	if _, errOut, code := s.gantry("exec", "web-0", "--", "no-such-command-xyz"); code == 0 || !strings.Contains(errOut, "no-such-command-xyz") {
		t.Fatalf("exec of a missing command: exit %d %s", code, errOut)
	}

	logs, _, _ := s.gantry("logs", "web")
	if !strings.HasPrefix(logs, "[web-0] ") {
		t.Errorf("logs of a service: %q, want its replica's lines prefixed", logs)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	forward := exec.CommandContext(ctx, gantryBin, "--data-dir", s.dataDir, "port-forward", "service/web", "0:http")
	stdout, err := forward.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := forward.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = forward.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	local := regexp.MustCompile(`^Forwarding from (\S+) -> http`).FindStringSubmatch(line)
	if err != nil || local == nil {
		t.Fatalf("port-forward said %q %v", line, err)
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + local[1] + "/")
	if err != nil {
		t.Fatalf("GET through the forwarded port: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "web-0") {
		t.Fatalf("GET through the forwarded port answered %q, want web-0's", body)
	}
}

func asExit(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*target = e
	return ok
}
