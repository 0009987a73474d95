// Package process is the runtime driver that runs replicas as plain child
// processes of the agent (for `gantry dev` and machines without Docker).
package process

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gantry-dev/gantry/internal/procgroup"
	"github.com/gantry-dev/gantry/runtime"
)

// Name is the runtime's name in inventories.
const Name = "process"

// Config tunes the driver.
type Config struct {
	// Dir holds one directory per replica: working dir and log files.
	Dir string
	// ExtraPath is put first on each replica's PATH (the agent's own
	// directory, so `gantry hello` resolves to this very binary).
	ExtraPath string
	// LogPollInterval is how often a followed log is checked for more.
	LogPollInterval time.Duration
	// PreviousLogBytes is how much of an ended instance's output is kept
	// (its end) for logs --previous.
	PreviousLogBytes int64
}

// DefaultConfig returns the defaults for a replica directory.
func DefaultConfig(dir string) Config {
	return Config{Dir: dir, LogPollInterval: 250 * time.Millisecond, PreviousLogBytes: runtime.DefaultPreviousLogBytes}
}

// Driver runs processes.
type Driver struct{ cfg Config }

// New returns a process driver.
func New(cfg Config) *Driver { return &Driver{cfg: cfg} }

// Name implements runtime.Driver.
func (d *Driver) Name() string { return Name }

// ReplicaDir is where a replica's files live.
func (d *Driver) ReplicaDir(replicaID string) string { return filepath.Join(d.cfg.Dir, replicaID) }

// Start runs the replica's command with a minimal environment: the agent's
// own environment (which may hold secrets) is not passed on.
func (d *Driver) Start(ctx context.Context, s runtime.Spec) (runtime.Task, error) {
	if len(s.Command) == 0 {
		return nil, errors.New("the process runtime needs spec.command")
	}
	dir := d.ReplicaDir(s.ReplicaID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("replica dir: %w", err)
	}
	env := d.environment(s, dir)
	path, err := lookPath(s.Command[0], envValue(env, "PATH"))
	if err != nil {
		return nil, err
	}
	if err := keepPrevious(d.logPath(s.ReplicaID), d.previousPath(s.ReplicaID), d.cfg.PreviousLogBytes); err != nil {
		return nil, err
	}
	output, err := openLog(d.logPath(s.ReplicaID))
	if err != nil {
		return nil, err
	}
	defer output.Close()
	cmd := exec.Command(path, append(append([]string{}, s.Command[1:]...), s.Args...)...)
	cmd.Args[0] = s.Command[0]
	cmd.Env = env
	cmd.Dir = dir
	if s.WorkingDir != "" {
		cmd.Dir = s.WorkingDir
	}
	cmd.Stdout, cmd.Stderr = output, output
	// Its own process group, so Stop reaches its children and they end
	// with it, as a container's do; and it dies with the agent, so a
	// killed agent leaves no replica behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	group, err := procgroup.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Command[0], err)
	}
	return &task{group: group, hostPorts: s.HostPorts, env: env, dir: cmd.Dir}, nil
}

func (d *Driver) environment(s runtime.Spec, dir string) []string {
	env := map[string]string{
		"PATH": strings.Trim(d.cfg.ExtraPath+":"+os.Getenv("PATH"), ":"),
		"HOME": dir,
	}
	for _, k := range []string{"LANG", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	for k, v := range s.Env {
		env[k] = v
	}
	env["GANTRY_REPLICA"] = s.ReplicaID
	env["GANTRY_SERVICE"] = s.Service
	env["GANTRY_MACHINE"] = s.MachineID
	maps.Copy(env, runtime.PortEnv(s, s.HostPorts))
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v
		}
	}
	return ""
}

// lookPath resolves a command against the replica's PATH, not the agent's.
func lookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		candidate := filepath.Join(dir, name)
		if info, err := os.Stat(candidate); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
			return candidate, nil
		}
	}
	return "", fmt.Errorf("command %q not found in PATH %s", name, path)
}

func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	return f, nil
}

type task struct {
	group     *procgroup.Leader
	hostPorts map[string]int
	env       []string
	dir       string
}

func (t *task) Done() <-chan struct{}     { return t.group.Done() }
func (t *task) ExitError() error          { return t.group.Err() }
func (t *task) HostPorts() map[string]int { return t.hostPorts }

// Endpoint is the host port on loopback: processes listen on the host.
func (t *task) Endpoint(port string) (string, bool) {
	p, ok := t.hostPorts[port]
	if !ok {
		return "", false
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), true
}

// Exec runs the command on the host with the replica's environment.
func (t *task) Exec(ctx context.Context, command []string) error {
	if len(command) == 0 {
		return errors.New("empty command")
	}
	path, err := lookPath(command[0], envValue(t.env, "PATH"))
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, path, command[1:]...)
	cmd.Env, cmd.Dir = t.env, t.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", command[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Stop sends SIGTERM to the replica's process group, then SIGKILL (what
// the replica left running once it exited is killed as it is reaped).
func (t *task) Stop(ctx context.Context, timeout time.Duration) error {
	t.group.Signal(syscall.SIGTERM)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-t.group.Done():
	case <-timer.C:
	case <-ctx.Done():
	}
	t.group.Signal(syscall.SIGKILL)
	<-t.group.Done()
	return nil
}
