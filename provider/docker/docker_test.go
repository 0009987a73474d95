package docker_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/gantry-dev/gantry/internal/testdocker"
	"github.com/gantry-dev/gantry/provider/docker"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/provisionertest"
	dockerrt "github.com/gantry-dev/gantry/runtime/docker"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// TestMain lets the test binary be the machine image: run as "agent", it
// checks its join token and idles until stopped, like an agent that cannot
// reach its server.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		info, err := os.Stat("/etc/gantry/join-token")
		if err != nil || info.Mode().Perm() != 0o600 {
			fmt.Println("join token missing or not 0600:", err)
			os.Exit(1)
		}
		fmt.Println("join token present, mode 0600")
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		os.Exit(0)
	}
	testdocker.MaybeRunWorkload()
	code := m.Run()
	removeRunResources()
	os.Exit(code)
}

// The network and machine image of this test process: runs on one host at
// once keep apart, and removeRunResources takes both away.
var (
	testNetwork  = fmt.Sprintf("gantry-provider-test-%d", os.Getpid())
	machineImage = fmt.Sprintf("gantry-test/provider-machine:run%d", os.Getpid())
)

// removeRunResources removes what this run left on the engine: machine
// containers on its network, the network and the machine image.
func removeRunResources() {
	cli, err := dockerrt.NewClient("")
	if err != nil {
		return
	}
	defer cli.Close()
	ctx := context.Background()
	list, _ := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("network", testNetwork)})
	for _, c := range list.Items {
		_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
	}
	_, _ = cli.NetworkRemove(ctx, testNetwork, client.NetworkRemoveOptions{})
	_, _ = cli.ImageRemove(ctx, machineImage, client.ImageRemoveOptions{Force: true})
}

func newProvider(t *testing.T) *docker.Provider {
	t.Helper()
	testdocker.Require(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := docker.DefaultConfig(t.TempDir())
	cfg.Network, cfg.Image, cfg.AgentBinary, cfg.StopGrace = testNetwork, machineImage, exe, 2*time.Second
	p, err := docker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestContract(t *testing.T) {
	provisionertest.RunWith(t, func(t *testing.T) provisioner.Provisioner { return newProvider(t) },
		provisionertest.Options{Timeout: time.Minute})
}

func launch(t *testing.T, p *docker.Provider, machine string) *provisioner.Instance {
	t.Helper()
	inst, err := p.Launch(context.Background(), provisioner.LaunchSpec{
		InstanceType: "docker.small", IdempotencyKey: machine, Zone: docker.Zone,
		Tags:      map[string]string{provisioner.TagManagedBy: provisioner.ManagedByValue, provisioner.TagMachine: machine},
		Bootstrap: provisioner.Bootstrap{ServerURL: "http://127.0.0.1:7400", Cluster: "c", Group: "g", MachineID: machine, JoinToken: "secret-join-token"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Terminate(context.Background(), inst.ID) })
	return inst
}

func TestMachineContainerHasLimitsLabelsAndNoVisibleToken(t *testing.T) {
	p := newProvider(t)
	cli := testdocker.Require(t)
	machine := fmt.Sprintf("m-%d", time.Now().UnixNano())
	inst := launch(t, p, machine)
	c, err := cli.ContainerInspect(context.Background(), inst.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, host := c.Container.Config, c.Container.HostConfig
	if host.NanoCPUs != 500_000_000 || host.Memory != 512<<20 {
		t.Errorf("machine limits: nanoCPUs %d memory %d, want docker.small's 0.5 CPU and 512Mi", host.NanoCPUs, host.Memory)
	}
	if cfg.Labels[provisioner.TagMachine] != machine || string(host.NetworkMode) != testNetwork {
		t.Errorf("labels %v network %q", cfg.Labels, host.NetworkMode)
	}
	all := strings.Join(append(append(cfg.Cmd, cfg.Env...), fmt.Sprint(cfg.Labels)), " ")
	if strings.Contains(all, "secret-join-token") {
		t.Fatal("the join token is visible in docker inspect")
	}
	gateway, err := p.Prepare(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(all, "--server http://"+gateway+":7400") {
		t.Errorf("agent is not told the server at the network gateway %s: %s", gateway, all)
	}
	waitRunning(t, p, inst.ID)
	waitLog(t, cli, inst.ID, "join token present, mode 0600")
}

func TestTerminateRemovesTheMachinesReplicaContainers(t *testing.T) {
	p := newProvider(t)
	cli := testdocker.Require(t)
	machine := fmt.Sprintf("m-%d", time.Now().UnixNano())
	inst := launch(t, p, machine)
	waitRunning(t, p, inst.ID)
	// The machine container carries the machine label too; its agent must
	// never take it for one of its replicas (and remove itself).
	driver, err := dockerrt.New(dockerrt.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if adopted, err := driver.Adopt(context.Background(), machine); err != nil || len(adopted) != 0 {
		t.Fatalf("the agent would adopt %d containers of an empty machine (%v)", len(adopted), err)
	}
	// A replica its agent started (and never stopped: say the agent was
	// killed).
	image := testdocker.WorkloadImage(t, cli, "provider-docker")
	replica, err := cli.ContainerCreate(context.Background(), client.ContainerCreateOptions{
		Name: dockerrt.ContainerName(machine, "web-0"),
		Config: &container.Config{Image: image, Env: []string{testdocker.WorkloadEnv + "=http", "PORT=8080"},
			Labels: map[string]string{dockerrt.LabelManagedBy: "gantry", dockerrt.LabelKind: dockerrt.KindReplica, dockerrt.LabelMachine: machine, dockerrt.LabelReplica: "web-0"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ContainerStart(context.Background(), replica.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := p.Terminate(context.Background(), inst.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{replica.ID, inst.ID} {
		if _, err := cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
			t.Errorf("container %s survived its machine's termination: %v", id, err)
		}
	}
	got, err := p.Describe(context.Background(), inst.ID)
	if err != nil || got.State != provisioner.StateTerminated {
		t.Fatalf("describe after terminate: %+v %v", got, err)
	}
}

func waitRunning(t *testing.T, p *docker.Provider, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		inst, err := p.Describe(context.Background(), id)
		if err == nil && inst.State == provisioner.StateRunning {
			if len(inst.Addresses) == 0 {
				t.Fatal("running machine without an address")
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("machine %s never running", id)
}

func waitLog(t *testing.T, cli *client.Client, id, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		rc, err := cli.ContainerLogs(context.Background(), id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
		if err == nil {
			buf := new(strings.Builder)
			_, _ = stdcopyAll(buf, rc)
			rc.Close()
			last = buf.String()
			if strings.Contains(last, want) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("machine log never said %q: %q", want, last)
}
