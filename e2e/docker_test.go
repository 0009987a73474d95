package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/internal/testdocker"
	"github.com/gantry-dev/gantry/runtime"
	"github.com/gantry-dev/gantry/runtime/docker"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// e2eImage holds the gantry binary under test (FROM scratch): it is the
// workload (`/gantry hello`) and, for the docker provider, the machine.
// Specs name it by e2eImagePlaceholder, which writeFile replaces with this
// run's own tag: checkouts testing on one host at once build their own.
var e2eImage = fmt.Sprintf("gantry-e2e:run%d", os.Getpid())

const e2eImagePlaceholder = "gantry-e2e:latest"

// machineExtras is what the server's docker provider adds to the machine
// image by default (the host's HAProxy), so the tests and their servers
// build one image, not two in turn under one tag.
func machineExtras() []string {
	if haproxy := docker.HostHAProxy(); haproxy != "" {
		return []string{haproxy}
	}
	return nil
}

func dockerSetup(t *testing.T) *client.Client {
	t.Helper()
	cli := testdocker.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := docker.EnsureImage(ctx, cli, e2eImage, gantryBin, machineExtras()...); err != nil {
		t.Fatal(err)
	}
	return cli
}

const containerWebSpec = `kind: Cluster
metadata: {name: ctr}
spec:
  capacityGroups:
    - groupId: general
      instanceType: local.medium
      minSize: 2
      maxSize: 3
  systemReserved: {cpu: 100m, memory: 128Mi}
---
kind: Service
metadata: {name: cweb}
spec:
  cluster: ctr
  image: gantry-e2e:latest
  command: [/gantry, hello]
  env: {GREETING: from a container}
  ports: [{name: http, containerPort: 8080}]
  replicas: %d
  resources: {cpu: 250m, memory: 128Mi}
  healthCheck:
    http: {port: http, path: /healthz}
    intervalSeconds: 1
  placement:
    spread: [{key: machine, maxSkew: 1}]
`

// containersOf lists the containers of a replica, on any machine.
func containersOf(t *testing.T, cli *client.Client, replica string) []string {
	t.Helper()
	list, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", docker.LabelReplica+"="+replica, docker.LabelKind+"="+docker.KindReplica)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range list.Items {
		ids = append(ids, c.ID)
	}
	return ids
}

func removeReplicaContainers(cli *client.Client, machines []api.Machine) {
	for _, m := range machines {
		_ = docker.RemoveReplicas(context.Background(), cli, m.ID, docker.DefaultSecretsDir)
	}
}

// Replicas as containers on agents with the docker runtime: limits, env
// and published port as inspected, HTTP, logs, restart after a kill,
// adoption by a restarted agent, removal on scale-in.
func TestDockerRuntimeRunsReplicasAsContainers(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	cli := dockerSetup(t)
	s := startServer(t, t.TempDir(), "--local-exit-with-server", "--local-runtime", "docker")
	t.Cleanup(func() { removeReplicaContainers(cli, s.machines()) })
	s.apply(t, "cweb.yaml", fmt.Sprintf(containerWebSpec, 2))
	waitFor(t, "2 container replicas answering HTTP", func() (bool, string) { return allAnswer(s.replicas("cweb"), 2) })

	r := s.replicas("cweb")[0]
	inspected, err := cli.ContainerInspect(context.Background(), docker.ContainerName(r.Machine, r.ID), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := inspected.Container
	if c.HostConfig.NanoCPUs != 250_000_000 || c.HostConfig.Memory != 128<<20 {
		t.Errorf("container limits: nanoCPUs %d memory %d, want 250m and 128Mi", c.HostConfig.NanoCPUs, c.HostConfig.Memory)
	}
	if !contains(c.Config.Env, "GREETING=from a container") || !contains(c.Config.Env, "PORT=8080") {
		t.Errorf("container env %v", c.Config.Env)
	}
	bindings := c.NetworkSettings.Ports[mustPort("8080/tcp")]
	if len(bindings) == 0 || bindings[0].HostPort != fmt.Sprint(r.HostPorts["http"]) {
		t.Errorf("published %v, replica status says host port %d", bindings, r.HostPorts["http"])
	}
	if out, _, _ := s.gantry("get", "replicas", "-o", "wide"); !strings.Contains(out, fmt.Sprint(r.HostPorts["http"])) {
		t.Errorf("gantry get replicas does not show host port %d:\n%s", r.HostPorts["http"], out)
	}

	t.Run("logs", func(t *testing.T) {
		out, errOut, code := s.gantry("logs", r.ID, "--tail", "5")
		if code != 0 || !strings.Contains(out, "hello listening on 0.0.0.0:8080") {
			t.Fatalf("gantry logs: exit %d %q %s", code, out, errOut)
		}
		followed := followLogs(t, s, r.ID)
		if !strings.Contains(followed, "hello listening") {
			t.Errorf("gantry logs -f: %q", followed)
		}
		if _, errOut, code := s.gantry("logs", "nope-0"); code == 0 || !strings.Contains(errOut, "nope-0") {
			t.Errorf("logs of an unknown replica: exit %d %s", code, errOut)
		}
	})

	t.Run("killed container restarts", func(t *testing.T) {
		before := containersOf(t, cli, r.ID)
		if _, err := cli.ContainerKill(context.Background(), before[0], client.ContainerKillOptions{Signal: "SIGKILL"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the killed replica restarted and answering", func() (bool, string) {
			rep, err := s.api.GetReplica(context.Background(), r.ID)
			if err != nil || rep.Restarts < 1 {
				return false, fmt.Sprintf("restarts %v %v", rep, err)
			}
			return allAnswer(s.replicas("cweb"), 2)
		})
		after := containersOf(t, cli, r.ID)
		if len(after) != 1 || after[0] == before[0] {
			t.Errorf("after the restart: containers %v (before %v)", after, before)
		}
	})

	t.Run("restarted agent adopts its containers", func(t *testing.T) {
		rs := s.replicas("cweb")
		before := map[string][]string{}
		for _, rep := range rs {
			before[rep.ID] = containersOf(t, cli, rep.ID)
		}
		inst := instanceOf(t, s.dataDir, r.Machine)
		if err := syscall.Kill(inst.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		agent := gantryCommand(inst.Args...)
		agent.SysProcAttr.Setpgid = true
		if err := agent.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = agent.Process.Kill(); _ = agent.Wait() })
		waitFor(t, "the restarted agent heartbeating with its replicas running", func() (bool, string) {
			m, err := s.api.GetMachine(context.Background(), r.Machine)
			if err != nil || m.LastHeartbeat == nil || time.Since(*m.LastHeartbeat) > time.Second {
				return false, fmt.Sprintf("machine %v %v", m, err)
			}
			return allAnswer(s.replicas("cweb"), 2)
		})
		waitPasses(t, s.dataDir, s.url, 5) // leftovers would be removed by now
		for _, rep := range s.replicas("cweb") {
			now := containersOf(t, cli, rep.ID)
			if rep.Machine == r.Machine && (len(now) != 1 || now[0] != before[rep.ID][0]) {
				t.Errorf("replica %s: containers %v, before the agent restart %v (want the same one, adopted)", rep.ID, now, before[rep.ID])
			}
			if len(now) != 1 {
				t.Errorf("replica %s has %d containers", rep.ID, len(now))
			}
		}
	})

	t.Run("scale in removes the container", func(t *testing.T) {
		s.apply(t, "cweb.yaml", fmt.Sprintf(containerWebSpec, 1))
		waitFor(t, "cweb-1's container gone", func() (bool, string) {
			ids := containersOf(t, cli, "cweb-1")
			return len(ids) == 0, fmt.Sprint(ids)
		})
	})

	t.Run("TEE isolation picks the sandbox runtime", func(t *testing.T) {
		tee := teeRuntime(t, cli)
		s.apply(t, "isolation.yaml", `kind: Service
metadata: {name: sealed}
spec:
  cluster: ctr
  image: gantry-e2e:latest
  command: [/gantry, hello]
  ports: [{name: http, containerPort: 8080}]
  resources: {cpu: 100m, memory: 128Mi}
  isolation: teeRequired
---
kind: Service
metadata: {name: plain}
spec:
  cluster: ctr
  image: gantry-e2e:latest
  command: [/gantry, hello]
  ports: [{name: http, containerPort: 8080}]
  resources: {cpu: 100m, memory: 128Mi}
  isolation: standardRequired
`)
		for svc, want := range map[string]string{"sealed": tee, "plain": ""} {
			waitFor(t, svc+" running", func() (bool, string) { return allAnswer(s.replicas(svc), 1) })
			rep := s.replicas(svc)[0]
			c, err := cli.ContainerInspect(context.Background(), docker.ContainerName(rep.Machine, rep.ID), client.ContainerInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Container.HostConfig.Runtime; got != want && !(want == "" && got == "runc") {
				t.Errorf("%s runs on runtime %q, want %q", svc, got, want)
			}
		}
		s.gantry("delete", "service", "sealed")
		s.gantry("delete", "service", "plain")
	})

	t.Run("bad input is a clear status and event", func(t *testing.T) {
		s.apply(t, "bad.yaml", `kind: Service
metadata: {name: noimage}
spec:
  cluster: ctr
  image: gantry-e2e/no-such-image:1
  ports: [{name: http, containerPort: 8080}]
  resources: {cpu: 100m, memory: 64Mi}
---
kind: Service
metadata: {name: tinymem}
spec:
  cluster: ctr
  image: gantry-e2e:latest
  command: [/gantry, hello]
  ports: [{name: http, containerPort: 8080}]
  resources: {cpu: 100m, memory: 1Mi}
`)
		for svc, want := range map[string]string{"noimage": "not present and pulling it failed", "tinymem": "inimum memory"} {
			waitFor(t, svc+" failed with a clear reason", func() (bool, string) {
				rs := s.replicas(svc)
				if len(rs) != 1 {
					return false, fmt.Sprintf("%d replicas", len(rs))
				}
				return rs[0].State == api.ReplicaFailed && strings.Contains(rs[0].Reason, want), string(rs[0].State) + ": " + rs[0].Reason
			})
			events, _, _ := s.gantry("get", "events")
			if !strings.Contains(events, want) {
				t.Errorf("no event says %q:\n%s", want, events)
			}
		}
		path := writeFile(t, s.dataDir, "badport.yaml", strings.Replace(fmt.Sprintf(containerWebSpec, 1), "containerPort: 8080", "containerPort: 70000", 1))
		if _, errOut, code := s.gantry("apply", "-f", path); code == 0 || !strings.Contains(errOut, "spec.ports[0].containerPort") {
			t.Errorf("invalid port: exit %d %s", code, errOut)
		}
		if rs := s.replicas("cweb"); len(rs) != 1 || rs[0].State != api.ReplicaRunning {
			t.Errorf("a rejected apply changed the service: %+v", rs)
		}
	})
}

// teeRuntime is the engine's TEE runtime; scripts/docker-up.sh registers
// one (runc under a Kata name) when it starts dockerd.
func teeRuntime(t *testing.T, cli *client.Client) string {
	info, err := cli.Info(context.Background(), client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name := range info.Info.Runtimes {
		if runtime.IsTEE(name) {
			return name
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("the engine has no TEE runtime; scripts/docker-up.sh starts dockerd with one")
	}
	t.Skip("SKIPPING: the engine has no TEE runtime (start dockerd through scripts/docker-up.sh)")
	return ""
}

// followLogs runs `gantry logs -f` until it prints a line, then stops it.
func followLogs(t *testing.T, s *server, replica string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, gantryBin, "--data-dir", s.dataDir, "logs", "-f", replica)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, _ := bufio.NewReader(out).ReadString('\n')
	return line
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func mustPort(s string) network.Port { return network.MustParsePort(s) }

const dockerSecretSpec = `kind: Cluster
metadata: {name: dsec}
spec:
  capacityGroups:
    - {groupId: general, instanceType: local.medium, minSize: 1, maxSize: 2}
---
kind: Service
metadata: {name: sweb}
spec:
  cluster: dsec
  image: gantry-e2e:latest
  command: [/gantry, hello]
  env: [{name: GREETING, secretRef: {name: greet, key: text}}, {name: VISIBLE, secretRef: {name: greet, key: visible, as: env}}]
  ports: [{name: http, containerPort: 8080}]
  replicas: 1
  resources: {cpu: 250m, memory: 128Mi}
`

// A secret reaches a container replica as a file (GREETING_FILE) that it
// reads, and nothing the engine answers shows its value; only a value the
// spec asks for as env is in the container's environment.
func TestDockerReplicasGetSecretsAsFiles(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	cli := dockerSetup(t)
	dir := t.TempDir()
	s := startServer(t, dir, "--local-exit-with-server", "--local-runtime", "docker")
	t.Cleanup(func() { removeReplicaContainers(cli, s.machines()) })
	hidden, visible := fmt.Sprintf("hidden-%d", time.Now().UnixNano()), fmt.Sprintf("visible-%d", time.Now().UnixNano())
	for name, value := range map[string]string{"text": hidden, "visible": visible} {
		if err := os.WriteFile(dir+"/"+name, []byte(value), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if out, errOut, code := s.gantry("secret", "create", "greet", "--from-file", "text="+dir+"/text", "--from-file", "visible="+dir+"/visible"); code != 0 {
		t.Fatalf("secret create: %s %s", out, errOut)
	}
	s.apply(t, "sweb.yaml", dockerSecretSpec)
	var r api.Replica
	waitFor(t, "the replica answering with its secret", func() (bool, string) {
		rs := s.replicas("sweb")
		if len(rs) != 1 || rs[0].State != api.ReplicaRunning {
			return false, fmt.Sprintf("%d replicas", len(rs))
		}
		r = rs[0]
		body, ok := answers(r)
		return ok && strings.HasPrefix(body, hidden), fmt.Sprintf("%s: %q", r.State, body)
	})
	inspected, err := cli.ContainerInspect(context.Background(), docker.ContainerName(r.Machine, r.ID), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(inspected)
	if strings.Contains(string(raw), hidden) {
		t.Fatal("docker inspect shows the secret value")
	}
	if !contains(inspected.Container.Config.Env, "VISIBLE="+visible) {
		t.Fatalf("the value asked for as env is not in the environment: %v", inspected.Container.Config.Env)
	}
}
