// Package ingress serves a cluster's exposed ports on an edge machine
// through HAProxy. Gantry writes HAProxy's whole configuration (each
// backend with room for more servers than it has) and starts it in
// master-worker mode; a change of a backend's replicas goes through the
// runtime API (address, weight, ready or maintenance) without a reload;
// a new port, or a backend that outgrows its room, reloads through the
// master CLI, the listening sockets passed to the new worker, so no
// connection is refused meanwhile.
package ingress

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// Config is how HAProxy runs.
type Config struct {
	// Binary is HAProxy's executable (looked up in PATH).
	Binary string
	// Dir holds the configuration, the sockets and HAProxy's output.
	Dir string
	// BindAddress is where exposed ports listen ("": every address).
	BindAddress string
	// Room is the least number of server slots a backend has; a backend
	// that needs more gets twice what it needs (a reload).
	Room int
	// ConnectTimeout bounds a connection to a replica (then the next is
	// tried); IdleTimeout a connection with nothing moving.
	ConnectTimeout time.Duration
	IdleTimeout    time.Duration
	// Retries is how many times a request or connection that could not
	// reach a replica is tried again, on another one.
	Retries int
	// StartTimeout bounds HAProxy's start or reload until it answers;
	// ReadyPoll is how often it is asked meanwhile.
	StartTimeout time.Duration
	ReadyPoll    time.Duration
	// StopTimeout is how long a stopping HAProxy may finish its
	// connections before it is killed.
	StopTimeout time.Duration
	Log         *slog.Logger
}

// DefaultConfig returns the defaults.
func DefaultConfig(dir string) Config {
	return Config{Binary: "haproxy", Dir: dir, Room: 16, ConnectTimeout: time.Second, IdleTimeout: time.Minute,
		Retries: 3, StartTimeout: 10 * time.Second, ReadyPoll: 20 * time.Millisecond, StopTimeout: 5 * time.Second, Log: slog.Default()}
}

// Proxy is HAProxy serving one machine's exposed ports.
type Proxy struct {
	cfg Config

	mu sync.Mutex
	// running is the configuration HAProxy serves (nil: not running).
	running *layout
	// master is HAProxy's master process.
	master *exec.Cmd
	exited chan struct{}
}

// New returns a proxy not started yet. Its directory is made absolute:
// HAProxy reads a relative socket path as a network address.
func New(cfg Config) *Proxy {
	if abs, err := filepath.Abs(cfg.Dir); err == nil && cfg.Dir != "" {
		cfg.Dir = abs
	}
	return &Proxy{cfg: cfg}
}

// debianBinary is where Debian installs HAProxy, outside the PATH of
// users other than root.
const debianBinary = "/usr/sbin/haproxy"

// Available says whether HAProxy can be run here (the bare name is also
// looked for where Debian puts it).
func (p *Proxy) Available() error {
	path, err := exec.LookPath(p.cfg.Binary)
	if err != nil && p.cfg.Binary == "haproxy" {
		path, err = exec.LookPath(debianBinary)
	}
	if err != nil {
		return fmt.Errorf("HAProxy (%s) not found: install it (Debian: apt-get install haproxy) for this machine to serve exposed ports: %w", p.cfg.Binary, err)
	}
	p.mu.Lock()
	p.cfg.Binary = path
	p.mu.Unlock()
	return nil
}

// Apply makes HAProxy serve routes: through the runtime API when only
// backends' servers changed, with a reload when ports or room changed,
// by starting it when it does not run; with no routes, it stops.
func (p *Proxy) Apply(ctx context.Context, routes []api.IngressRoute) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running != nil && !p.alive() {
		p.cfg.Log.Warn("HAProxy exited; starting it again")
		p.running = nil
	}
	if len(routes) == 0 {
		p.stopLocked()
		return nil
	}
	next := plan(p.running, routes, p.cfg.Room)
	switch {
	case p.running == nil:
		if err := p.start(ctx, next); err != nil {
			return err
		}
	case !next.sameShape(p.running):
		if err := p.reload(ctx, next); err != nil {
			return err
		}
	default:
		if cmds := runtimeCommands(p.running, next); len(cmds) > 0 {
			if err := runtimeAPI(ctx, p.adminSocket(), cmds); err != nil {
				// The servers' state is unknown now: a reload sets all of it.
				p.cfg.Log.Warn("HAProxy runtime API failed; reloading", "err", err)
				if err := p.reload(ctx, next); err != nil {
					return err
				}
			}
		}
	}
	p.running = next
	return nil
}

// Stop stops HAProxy, letting its connections finish for StopTimeout.
func (p *Proxy) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked()
}

func (p *Proxy) configFile() string   { return filepath.Join(p.cfg.Dir, "haproxy.cfg") }
func (p *Proxy) adminSocket() string  { return filepath.Join(p.socketDir(), "admin.sock") }
func (p *Proxy) masterSocket() string { return filepath.Join(p.socketDir(), "master.sock") }

// maxSocketPath is the longest directory of a Unix socket HAProxy takes
// (97 bytes for the whole path), less the sockets' names.
const maxSocketPath = 97 - len("/master.sock")

// socketDir holds the sockets: Dir, or when Dir is too deep for a Unix
// socket's path, a directory of its own under the system's temporary
// directory, named after Dir.
func (p *Proxy) socketDir() string {
	if len(p.cfg.Dir) <= maxSocketPath {
		return p.cfg.Dir
	}
	sum := sha256.Sum256([]byte(p.cfg.Dir))
	return filepath.Join(os.TempDir(), "gantry-ingress-"+hex.EncodeToString(sum[:8]))
}

func (p *Proxy) alive() bool {
	if p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// writeConfig writes and checks l's configuration.
func (p *Proxy) writeConfig(ctx context.Context, l *layout) error {
	for _, dir := range []string{p.cfg.Dir, p.socketDir()} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("ingress directory: %w", err)
		}
	}
	text := render(l, p.cfg, p.adminSocket())
	tmp := p.configFile() + ".new"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		return fmt.Errorf("write HAProxy configuration: %w", err)
	}
	out, err := exec.CommandContext(ctx, p.cfg.Binary, "-c", "-f", tmp).CombinedOutput()
	if err != nil {
		return fmt.Errorf("HAProxy refuses the configuration: %w: %s", err, out)
	}
	return os.Rename(tmp, p.configFile())
}

func (p *Proxy) start(ctx context.Context, l *layout) error {
	if err := p.writeConfig(ctx, l); err != nil {
		return err
	}
	_ = os.Remove(p.masterSocket())
	_ = os.Remove(p.adminSocket())
	output, err := os.OpenFile(filepath.Join(p.cfg.Dir, "haproxy.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("HAProxy log: %w", err)
	}
	defer output.Close()
	before, _ := output.Seek(0, io.SeekEnd)
	cmd := exec.Command(p.cfg.Binary, "-W", "-S", p.masterSocket(), "-f", p.configFile())
	cmd.Stdout, cmd.Stderr, cmd.Dir = output, output, p.cfg.Dir
	// HAProxy dies with the agent (its workers with their master): a
	// restarted agent starts its own, and none is left serving an old
	// configuration. The parent-death signal follows the thread that
	// started the process, so that thread stays locked until it exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	started, exited := make(chan error, 1), make(chan struct{})
	go func() {
		goruntime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			close(exited)
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start HAProxy: %w", err)
	}
	p.master, p.exited = cmd, exited
	if err := p.waitAnswering(ctx, ""); err != nil {
		p.stopLocked()
		return fmt.Errorf("HAProxy did not start (log %s): %w: %s", output.Name(), err, alerts(output.Name(), before))
	}
	p.cfg.Log.Info("HAProxy serving the exposed ports", "ports", l.ports(), "pid", cmd.Process.Pid)
	return nil
}

// reload has the master start a worker on the new configuration; the
// old worker hands its listeners over and finishes its connections.
func (p *Proxy) reload(ctx context.Context, l *layout) error {
	if err := p.writeConfig(ctx, l); err != nil {
		return err
	}
	before, _ := workerPID(ctx, p.adminSocket())
	if err := runtimeAPI(ctx, p.masterSocket(), []string{"reload"}); err != nil {
		return fmt.Errorf("reload HAProxy: %w", err)
	}
	if err := p.waitAnswering(ctx, before); err != nil {
		return fmt.Errorf("HAProxy reload: %w", err)
	}
	p.cfg.Log.Info("HAProxy reloaded", "ports", l.ports())
	return nil
}

// waitAnswering waits until a worker other than old answers on the
// runtime API.
func (p *Proxy) waitAnswering(ctx context.Context, old string) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout)
	defer cancel()
	tick := time.NewTicker(p.cfg.ReadyPoll)
	defer tick.Stop()
	for {
		pid, err := workerPID(ctx, p.adminSocket())
		if err == nil && pid != old {
			return nil
		}
		select {
		case <-p.exited:
			return errors.New("HAProxy exited")
		case <-ctx.Done():
			return fmt.Errorf("no answer within %s: %w", p.cfg.StartTimeout, errors.Join(err, ctx.Err()))
		case <-tick.C:
		}
	}
}

func (p *Proxy) stopLocked() {
	p.running = nil
	if !p.alive() {
		return
	}
	_ = p.master.Process.Signal(syscall.SIGUSR1) // soft stop: listeners close, connections finish
	select {
	case <-p.exited:
	case <-time.After(p.cfg.StopTimeout):
		_ = p.master.Process.Kill()
		<-p.exited
	}
	if dir := p.socketDir(); dir != p.cfg.Dir {
		_ = os.RemoveAll(dir) // made for this proxy under the temporary directory
	}
}

// ports lists what a layout listens on.
func (l *layout) ports() []int {
	out := make([]int, 0, len(l.routes))
	for _, r := range l.routes {
		out = append(out, r.port)
	}
	slices.Sort(out)
	return out
}

// alerts are the last of HAProxy's ALERT lines in its log from offset on
// (why this start failed).
func alerts(log string, offset int64) string {
	data, _ := os.ReadFile(log)
	data = data[min(offset, int64(len(data))):]
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "[ALERT]") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return strings.Join(out[max(0, len(out)-2):], "; ")
}
