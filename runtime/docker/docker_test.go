package docker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/gantry-dev/gantry/internal/testdocker"
	"github.com/gantry-dev/gantry/runtime"
	"github.com/gantry-dev/gantry/runtime/docker"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

func TestMain(m *testing.M) {
	testdocker.MaybeRunWorkload()
	os.Exit(m.Run())
}

type env struct {
	cli     *client.Client
	driver  *docker.Driver
	image   string
	machine string
}

func setup(t *testing.T) *env {
	cli := testdocker.Require(t)
	image := testdocker.WorkloadImage(t, cli, "runtime-docker")
	cfg := docker.DefaultConfig()
	cfg.RequestTimeout = 20 * time.Second
	d, err := docker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{cli: cli, driver: d, image: image, machine: fmt.Sprintf("test-%d", time.Now().UnixNano())}
	t.Cleanup(func() { e.removeAll(t) })
	return e
}

func (e *env) removeAll(t *testing.T) {
	list, err := e.cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", docker.LabelMachine+"="+e.machine)})
	if err != nil {
		t.Log(err)
		return
	}
	for _, c := range list.Items {
		_, _ = e.cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
	}
}

func (e *env) spec(replica, workload string) runtime.Spec {
	return runtime.Spec{
		ReplicaID: replica, Service: "web", MachineID: e.machine, SpecHash: "h1", Image: e.image,
		Env:           map[string]string{testdocker.WorkloadEnv: workload, "GREETING": "hi"},
		ContainerPort: map[string]int{"http": 8080}, StopTimeout: 2 * time.Second,
		MilliCPU: 250, MemoryBytes: 64 << 20,
	}
}

func (e *env) inspect(t *testing.T, replica string) (client.ContainerInspectResult, error) {
	return e.cli.ContainerInspect(context.Background(), docker.ContainerName(e.machine, replica), client.ContainerInspectOptions{})
}

func get(url string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return string(body), nil
		}
		if time.Now().After(deadline) {
			return "", err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestReplicaContainerHasLimitsEnvPortAndAnswersHTTP(t *testing.T) {
	e := setup(t)
	task, err := e.driver.Start(context.Background(), e.spec("web-0", "http"))
	if err != nil {
		t.Fatal(err)
	}
	inspected, err := e.inspect(t, "web-0")
	if err != nil {
		t.Fatal(err)
	}
	c := inspected.Container
	if c.HostConfig.NanoCPUs != 250_000_000 || c.HostConfig.Memory != 64<<20 {
		t.Errorf("limits: nanoCPUs %d memory %d", c.HostConfig.NanoCPUs, c.HostConfig.Memory)
	}
	for _, want := range []string{"GREETING=hi", "PORT=8080", "GANTRY_REPLICA=web-0"} {
		if !slices.Contains(c.Config.Env, want) {
			t.Errorf("env lacks %s", want)
		}
	}
	if c.Config.Labels[docker.LabelReplica] != "web-0" || c.Config.Labels[docker.LabelMachine] != e.machine {
		t.Errorf("labels %v", c.Config.Labels)
	}
	hostPort := task.HostPorts()["http"]
	if hostPort == 0 {
		t.Fatalf("no published port: %v", task.HostPorts())
	}
	if b := c.NetworkSettings.Ports[mustPort("8080/tcp")]; len(b) == 0 || b[0].HostPort != fmt.Sprint(hostPort) {
		t.Errorf("inspect says port 8080 is published as %v, task says %d", b, hostPort)
	}
	body, err := get(fmt.Sprintf("http://127.0.0.1:%d/", hostPort), 10*time.Second)
	if err != nil || body != "hello web-0 hi\n" {
		t.Fatalf("GET published port: %q %v", body, err)
	}
	ep, ok := task.Endpoint("http")
	if !ok {
		t.Fatal("no endpoint for http")
	}
	if body, err := get("http://"+ep+"/", 5*time.Second); err != nil || !strings.HasPrefix(body, "hello") {
		t.Errorf("GET endpoint %s: %q %v", ep, body, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := task.Exec(ctx, []string{docker.BinaryPath, "probe-ok"}); err != nil {
		t.Errorf("exec probe-ok: %v", err)
	}
	if err := task.Exec(ctx, []string{docker.BinaryPath, "probe-fail"}); err == nil || !strings.Contains(err.Error(), "exited 3") || !strings.Contains(err.Error(), "on purpose") {
		t.Errorf("exec probe-fail: %v", err)
	}
	if err := task.Stop(context.Background(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := e.inspect(t, "web-0"); !cerrdefs.IsNotFound(err) {
		t.Errorf("container still there after Stop: %v", err)
	}
}

func TestExitCodeIsReported(t *testing.T) {
	e := setup(t)
	task, err := e.driver.Start(context.Background(), e.spec("job-0", "exit:3"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-task.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("container did not exit")
	}
	if err := task.ExitError(); err == nil || !strings.Contains(err.Error(), "exit code 3") {
		t.Fatalf("exit error %v", err)
	}
	r, err := e.driver.Logs(context.Background(), e.machine, "job-0", runtime.LogOptions{Tail: -1})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(r)
	r.Close()
	if !strings.Contains(string(out), "exiting with 3") {
		t.Errorf("logs %q", out)
	}
	_ = task.Stop(context.Background(), time.Second)
}

func TestBadInputIsAClearError(t *testing.T) {
	e := setup(t)
	s := e.spec("bad-0", "http")
	s.Image = "gantry-test/no-such-image:1"
	if _, err := e.driver.Start(context.Background(), s); err == nil || !strings.Contains(err.Error(), "gantry-test/no-such-image:1 is not present and pulling it failed") {
		t.Errorf("missing image: %v", err)
	}
	s = e.spec("bad-1", "http")
	s.MemoryBytes = 1 << 20
	if _, err := e.driver.Start(context.Background(), s); err == nil || !strings.Contains(strings.ToLower(err.Error()), "minimum memory") {
		t.Errorf("memory below the engine's minimum: %v", err)
	}
	s = e.spec("bad-2", "http")
	s.ContainerPort = map[string]int{"http": 0}
	if _, err := e.driver.Start(context.Background(), s); err == nil || !strings.Contains(err.Error(), "port http") {
		t.Errorf("invalid port: %v", err)
	}
	for _, r := range []string{"bad-0", "bad-1", "bad-2"} {
		if _, err := e.inspect(t, r); !cerrdefs.IsNotFound(err) {
			t.Errorf("a failed start left container %s behind: %v", r, err)
		}
	}
}

func TestAdoptFindsRunningContainersByLabel(t *testing.T) {
	e := setup(t)
	first, err := e.driver.Start(context.Background(), e.spec("web-0", "http"))
	if err != nil {
		t.Fatal(err)
	}
	port := first.HostPorts()["http"]
	// A new driver (a restarted agent) adopts the container.
	d2, err := docker.New(docker.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	adopted, err := d2.Adopt(context.Background(), e.machine)
	if err != nil {
		t.Fatal(err)
	}
	if len(adopted) != 1 || adopted[0].ReplicaID != "web-0" || adopted[0].SpecHash != "h1" {
		t.Fatalf("adopted %+v", adopted)
	}
	if got := adopted[0].Task.HostPorts()["http"]; got != port {
		t.Errorf("adopted host port %d, want %d", got, port)
	}
	select {
	case <-adopted[0].Task.Done():
		t.Fatal("adopted task reports exited while the container runs")
	default:
	}
	// Another machine's containers are not adopted.
	if other, _ := d2.Adopt(context.Background(), e.machine+"-other"); len(other) != 0 {
		t.Errorf("adopted another machine's containers: %v", other)
	}
	if err := adopted[0].Task.Stop(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	<-first.Done()
}

func TestLogsTailAndFollow(t *testing.T) {
	e := setup(t)
	task, err := e.driver.Start(context.Background(), e.spec("web-0", "http"))
	if err != nil {
		t.Fatal(err)
	}
	defer task.Stop(context.Background(), time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	r, err := e.driver.Logs(ctx, e.machine, "web-0", runtime.LogOptions{Follow: true, Tail: 10})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	n, err := r.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), "workload listening on 8080") {
		t.Fatalf("followed logs: %q %v", buf[:n], err)
	}
	cancel()
	r.Close()
	if _, err := e.driver.Logs(context.Background(), e.machine, "nope-0", runtime.LogOptions{Tail: -1}); err == nil || !strings.Contains(err.Error(), "no container") {
		t.Errorf("logs of an unknown replica: %v", err)
	}
}

func TestRuntimesReportsDocker(t *testing.T) {
	e := setup(t)
	names, err := e.driver.Runtimes(context.Background())
	if err != nil || names[0] != docker.Name {
		t.Fatalf("runtimes %v %v", names, err)
	}
	for _, n := range names[1:] {
		if !runtime.IsTEE(n) {
			t.Errorf("non-TEE runtime %q reported", n)
		}
	}
}

func mustPort(s string) network.Port { return network.MustParsePort(s) }

// Secret values reach the container as files on a tmpfs of the host,
// bind-mounted read-only, named by <NAME>_FILE: the replica reads them,
// and nothing the engine answers (inspect) holds them. Stopping the
// replica removes them.
func TestSecretValuesAreFilesTheEngineNeverShows(t *testing.T) {
	e := setup(t)
	secretsDir := filepath.Join("/dev/shm", "gantry-test-secrets-"+e.machine)
	t.Cleanup(func() { os.RemoveAll(secretsDir) })
	cfg := docker.DefaultConfig()
	cfg.SecretsDir = secretsDir
	d, err := docker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	value := "s3cret-" + e.machine
	spec := e.spec("web-0", "http")
	delete(spec.Env, "GREETING")
	spec.SecretFiles = map[string]string{"GREETING": value}
	task, err := d.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	body, err := get(fmt.Sprintf("http://127.0.0.1:%d/", task.HostPorts()["http"]), 10*time.Second)
	if err != nil || body != "hello web-0 "+value+"\n" {
		t.Fatalf("the replica read %q (%v), want its secret value", body, err)
	}
	inspected, err := e.cli.ContainerInspect(context.Background(), docker.ContainerName(e.machine, "web-0"), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(inspected)
	if strings.Contains(string(raw), value) {
		t.Fatal("docker inspect shows the secret value")
	}
	if !slices.Contains(inspected.Container.Config.Env, "GREETING_FILE="+runtime.SecretDir+"/GREETING") {
		t.Fatalf("env %v lacks GREETING_FILE", inspected.Container.Config.Env)
	}
	files, _ := filepath.Glob(filepath.Join(secretsDir, "*", "GREETING"))
	if len(files) != 1 {
		t.Fatalf("secret files on the host: %v", files)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := task.Stop(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(secretsDir, "*", "GREETING")); len(files) != 0 {
		t.Fatalf("secret files left after the replica stopped: %v", files)
	}
}

// A secrets directory that is not on a tmpfs is refused: the values never
// reach a disk.
func TestSecretFilesNeedATmpfs(t *testing.T) {
	e := setup(t)
	cfg := docker.DefaultConfig()
	// The package's own directory is on the disk the repository is on
	// (a temporary directory may be a tmpfs).
	onDisk, err := os.MkdirTemp(".", "secrets-on-disk-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(onDisk) })
	cfg.SecretsDir, _ = filepath.Abs(onDisk)
	d, err := docker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	spec := e.spec("web-0", "http")
	spec.SecretFiles = map[string]string{"GREETING": "value"}
	if _, err := d.Start(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "not on a tmpfs") {
		t.Fatalf("start with secrets on disk: %v, want a refusal", err)
	}
}

// A container's output goes with it; the end of the last one's is kept
// for logs --previous: the crashed instance's when the replica starts
// again, the stopped one's when it stops.
func TestPreviousInstancesOutputOutlivesItsContainer(t *testing.T) {
	e := setup(t)
	cfg := docker.DefaultConfig()
	cfg.RequestTimeout, cfg.PreviousLogsDir = 20*time.Second, t.TempDir()
	d, err := docker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	previous := func() (string, error) {
		r, err := d.Logs(context.Background(), e.machine, "web-0", runtime.LogOptions{Tail: -1, Previous: true})
		if err != nil {
			return "", err
		}
		defer r.Close()
		data, err := io.ReadAll(r)
		return string(data), err
	}
	crashed, err := d.Start(context.Background(), e.spec("web-0", "exit:3"))
	if err != nil {
		t.Fatal(err)
	}
	<-crashed.Done()
	if _, err := previous(); err == nil || !strings.Contains(err.Error(), "no previous instance") {
		t.Fatalf("previous before a restart: %v, want none", err)
	}
	again, err := d.Start(context.Background(), e.spec("web-0", "http"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := previous(); err != nil || !strings.Contains(got, "exiting with 3") {
		t.Fatalf("previous after the restart: %q %v, want the crashed instance's output", got, err)
	}
	waitLogged(t, d, e.machine, "web-0", "workload listening")
	if err := again.Stop(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	if got, err := previous(); err != nil || !strings.Contains(got, "workload listening") {
		t.Fatalf("previous after the stop: %q %v, want the stopped instance's output", got, err)
	}
}

// waitLogged waits until a running replica's output holds want.
func waitLogged(t *testing.T, d *docker.Driver, machine, replica, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := d.Logs(ctx, machine, replica, runtime.LogOptions{Follow: true, Tail: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var seen strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(seen.String(), want) {
		n, err := r.Read(buf)
		seen.Write(buf[:n])
		if err != nil {
			t.Fatalf("output %q ended before %q: %v", seen.String(), want, err)
		}
	}
}

// An exec in the container gets the caller's stdin, its stdout and
// stderr apart (or on a terminal), and reports the exit status.
func TestExecStreamInTheContainer(t *testing.T) {
	e := setup(t)
	tk, err := e.driver.Start(context.Background(), e.spec("web-0", "http"))
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Stop(context.Background(), time.Second)
	execer := tk.(runtime.StreamExecer)
	var out, errOut strings.Builder
	code, err := execer.ExecStream(context.Background(), []string{"/gantry", "echo-stdin"},
		runtime.ExecStreams{Stdin: strings.NewReader("from stdin\n"), Stdout: &out, Stderr: &errOut})
	if err != nil || code != 5 {
		t.Fatalf("exit %d %v, want 5", code, err)
	}
	if out.String() != "terminal=false greeting=hi\nfrom stdin\n" || errOut.String() != "done\n" {
		t.Fatalf("stdout %q stderr %q", out.String(), errOut.String())
	}
	out.Reset()
	stdin, feed := io.Pipe()
	go func() { _, _ = feed.Write([]byte("typed\n\x04")); feed.Close() }()
	code, err = execer.ExecStream(context.Background(), []string{"/gantry", "echo-stdin"},
		runtime.ExecStreams{Stdin: stdin, Stdout: &out, TTY: true})
	if err != nil || code != 5 || !strings.Contains(out.String(), "terminal=true greeting=hi") || !strings.Contains(out.String(), "typed") {
		t.Fatalf("on a terminal: exit %d %v, output %q", code, err, out.String())
	}
}

// A container is measured through the engine's statistics.
func TestMeasureReadsTheEnginesStatistics(t *testing.T) {
	e := setup(t)
	tk, err := e.driver.Start(context.Background(), e.spec("web-0", "http"))
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Stop(context.Background(), time.Second)
	s, err := tk.(runtime.Measurer).Measure(context.Background())
	if err != nil || s.MemoryBytes <= 0 || s.CPU <= 0 {
		t.Fatalf("sample %+v %v, want CPU time and memory in use", s, err)
	}
}
