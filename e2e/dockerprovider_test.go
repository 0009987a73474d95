package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	dockerprovider "github.com/gantry-dev/gantry/provider/docker"
	"github.com/gantry-dev/gantry/runtime/docker"
	"github.com/moby/moby/client"
)

const dockerClusterSpec = `kind: Cluster
metadata: {name: box}
spec:
  provider: {name: docker}
  capacityGroups:
    - groupId: general
      instanceType: docker.medium
      minSize: 3
      maxSize: 4
  systemReserved: {cpu: 100m, memory: 64Mi}
---
kind: Service
metadata: {name: boxweb}
spec:
  cluster: box
  image: gantry-e2e:latest
  command: [/gantry, hello]
  ports: [{name: http, containerPort: 8080}]
  replicas: 3
  resources: {cpu: 250m, memory: 128Mi}
  healthCheck:
    http: {port: http, path: /healthz}
    intervalSeconds: 1
  placement:
    spread: [{key: machine, maxSkew: 1}]
`

// A 3-machine cluster whose machines are containers: a killed machine
// container's replicas run on the others, and nothing of it is left.
func TestDockerProviderMachineLoss(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	cli := dockerSetup(t)
	s, _ := startDockerProviderServer(t, cli, "gantry-e2e")
	s.apply(t, "box.yaml", dockerClusterSpec)
	waitFor(t, "3 replicas answering on machine containers", func() (bool, string) {
		rs := s.replicas("boxweb")
		machines := map[string]bool{}
		for _, r := range rs {
			machines[r.Machine] = true
		}
		if ok, why := allAnswer(rs, 3); !ok {
			return false, why
		}
		return len(machines) >= 2, fmt.Sprintf("replicas on %d machines", len(machines))
	})
	victim := busiestMachine(s.replicas("boxweb"))
	m, err := s.api.GetMachine(context.Background(), victim)
	if err != nil {
		t.Fatal(err)
	}
	inspected, err := cli.ContainerInspect(context.Background(), m.ProviderID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if inspected.Container.HostConfig.NanoCPUs != 1_000_000_000 || inspected.Container.HostConfig.Memory != 1<<30 {
		t.Errorf("machine container limits %d/%d, want docker.medium's 1 CPU and 1Gi", inspected.Container.HostConfig.NanoCPUs, inspected.Container.HostConfig.Memory)
	}
	t.Logf("killing machine container %s (%s)", m.ProviderID, victim)
	if _, err := cli.ContainerKill(context.Background(), m.ProviderID, client.ContainerKillOptions{Signal: "SIGKILL"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replicas running off the killed machine", func() (bool, string) {
		rs := s.replicas("boxweb")
		for _, r := range rs {
			if r.Machine == victim {
				return false, r.ID + " still on " + victim
			}
		}
		return allAnswer(rs, 3)
	})
	waitFor(t, "the killed machine and its replica containers removed", func() (bool, string) {
		list, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: docker.ReplicasOf(victim)})
		if err != nil || len(list.Items) > 0 {
			return false, fmt.Sprintf("%d replica containers left, %v", len(list.Items), err)
		}
		if _, err := cli.ContainerInspect(context.Background(), m.ProviderID, client.ContainerInspectOptions{}); err == nil {
			return false, "machine container still there"
		}
		return true, ""
	})
	events, _, _ := s.gantry("get", "events")
	if !strings.Contains(events, victim) {
		t.Errorf("no event about %s:\n%s", victim, events)
	}
	if ms := s.machines(); len(ms) < 3 {
		t.Errorf("the cluster shrank below minSize: %d machines", len(ms))
	}
	for _, mm := range s.machines() {
		if mm.ID == victim && mm.FleetState != api.FleetTerminated {
			t.Errorf("victim still %s", mm.FleetState)
		}
	}
}

// removeNetwork removes every container on the test network (the server
// terminates its machines, unless it was killed) and the network.
// startDockerProviderServer starts a server whose docker provider puts its
// machines on a network of this test's own (named after prefix), removed
// with everything on it once the server is gone.
func startDockerProviderServer(t *testing.T, cli *client.Client, prefix string) (*server, string) {
	t.Helper()
	network := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000)
	gateway, err := dockerprovider.EnsureNetwork(context.Background(), cli, network)
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs after the server is killed.
	t.Cleanup(func() { removeNetwork(cli, network) })
	return startServer(t, t.TempDir(), "--listen", gateway+":0", "--docker-network", network, "--docker-image", e2eImage, "--docker-stop-grace", "2s"), network
}

func removeNetwork(cli *client.Client, network string) {
	ctx := context.Background()
	list, _ := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("network", network)})
	for _, c := range list.Items {
		if machine := c.Labels["gantry.dev/machine"]; machine != "" {
			_ = docker.RemoveReplicas(ctx, cli, machine, docker.DefaultSecretsDir)
		}
		_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
	}
	_, _ = cli.NetworkRemove(ctx, network, client.NetworkRemoveOptions{})
}

// The README's docker command: `gantry dev --provider docker -f
// examples/hello-docker.yaml` runs 3 machine containers whose replicas are
// containers, and Ctrl-C removes them all.
func TestDevWithTheDockerProvider(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	cli := dockerSetup(t)
	network := fmt.Sprintf("gantry-e2e-dev-%d", time.Now().UnixNano()%1_000_000)
	t.Cleanup(func() { removeNetwork(cli, network) })
	// The example on this run's image tag, so that nothing is left under
	// the shared gantry:dev.
	example, err := os.ReadFile("../examples/hello-docker.yaml")
	if err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(t.TempDir(), "hello-docker.yaml")
	if err := os.WriteFile(specFile, []byte(strings.ReplaceAll(string(example), "image: gantry:dev", "image: "+e2eImage)), 0o600); err != nil {
		t.Fatal(err)
	}
	runDevOnce(t, filepath.Join(t.TempDir(), "state"), 1, "hello from a Gantry container",
		"--provider", "docker", "-f", specFile, "--docker-network", network, "--docker-image", e2eImage, "--workload-image", e2eImage)
	list, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("network", network)})
	if err != nil || len(list.Items) != 0 {
		t.Fatalf("containers left after Ctrl-C: %d (%v)", len(list.Items), err)
	}
}
