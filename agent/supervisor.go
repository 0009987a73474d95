package agent

import (
	"context"
	"fmt"
	"maps"
	"net"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/failover/member"
	"github.com/gantry-dev/gantry/runtime"
)

// supervisor keeps one replica running: it starts the task, restarts it
// with exponential backoff when it exits, and probes its health.
type supervisor struct {
	agent      *Agent
	assignment api.Assignment
	// adopted is a task left running by an earlier agent, used instead of
	// starting a new one.
	adopted runtime.Task

	mu        sync.Mutex
	hostPorts map[string]int
	// task is the replica's running task (nil between runs), for exec
	// and port-forward.
	task runtime.Task
	// failover is the member's current role (it changes without a restart;
	// the assignment keeps the one it started with).
	failover *api.FailoverAssignment

	status api.ReplicaStatus

	stop chan struct{}
	done chan struct{}
	// stopTimeout, when set, replaces the spec's stop timeout (a primary
	// whose lease runs out has little time).
	stopTimeout time.Duration
}

func newSupervisor(a *Agent, as api.Assignment, adopted runtime.Task) (*supervisor, error) {
	ports, err := freePorts(as.Spec.Ports)
	if err != nil {
		return nil, err
	}
	if adopted != nil {
		ports = adopted.HostPorts()
	}
	s := &supervisor{agent: a, assignment: as, adopted: adopted, hostPorts: ports, failover: as.Failover, stop: make(chan struct{}), done: make(chan struct{})}
	s.status = api.ReplicaStatus{ReplicaID: as.ReplicaID, Incarnation: as.Incarnation, SpecHash: as.SpecHash, State: api.ReplicaStarting, Health: api.HealthUnknown, HostPorts: ports}
	return s, nil
}

// freePorts picks a free host port per declared port. A port is only free
// until someone takes it; the process binds it right away.
func freePorts(ports []api.Port) (map[string]int, error) {
	out := map[string]int{}
	for _, p := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a host port for %s: %w", p.Name, err)
		}
		out[p.Name] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	return out, nil
}

// repickPorts takes fresh host ports before a restart: the old ones may
// have been taken meanwhile (an outgoing connection can hold any
// ephemeral port), and a replica must not crash-loop on a bind.
func (s *supervisor) repickPorts() {
	ports, err := freePorts(s.assignment.Spec.Ports)
	if err != nil {
		return // the old ones, then
	}
	s.mu.Lock()
	s.hostPorts = ports
	s.mu.Unlock()
}

func (s *supervisor) snapshot() api.ReplicaStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.HostPorts = s.hostPorts
	return st
}

func (s *supervisor) role() *api.FailoverAssignment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failover
}

func (s *supervisor) setRole(f *api.FailoverAssignment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failover = f
}

// assignmentPorts are the replica's declared container ports, by name.
func (s *supervisor) assignmentPorts() map[string]int {
	out := map[string]int{}
	for _, p := range s.assignment.Spec.Ports {
		out[p.Name] = p.ContainerPort
	}
	return out
}

// running is the replica's task now (nil between runs).
func (s *supervisor) running() runtime.Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.task
}

func (s *supervisor) ports() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hostPorts
}

func (s *supervisor) update(fn func(st *api.ReplicaStatus)) {
	s.mu.Lock()
	before := s.status
	fn(&s.status)
	changed := before.State != s.status.State || before.Health != s.status.Health
	s.mu.Unlock()
	if changed {
		s.agent.nudge()
	}
}

func (s *supervisor) runtimeSpec() runtime.Spec {
	as := s.assignment
	sp := as.Spec
	containerPorts, mainPort := map[string]int{}, ""
	for _, p := range sp.Ports {
		containerPorts[p.Name] = p.ContainerPort
	}
	if len(sp.Ports) > 0 {
		mainPort = sp.Ports[0].Name
	}
	var gpuIDs []string
	for _, g := range as.GPUs {
		if g.UUID != "" {
			gpuIDs = append(gpuIDs, g.UUID)
		} else {
			gpuIDs = append(gpuIDs, fmt.Sprint(g.Index))
		}
	}
	env, secretFiles := withSecrets(sp.Env, sp.SecretEnv, as.SecretEnv, s.agent.secretFiles())
	if f := sp.Failover; f != nil {
		env = maps.Clone(env)
		if env == nil {
			env = map[string]string{}
		}
		env[member.DirEnv] = s.agent.memberDir(f.Group)
		if role := s.role(); role != nil { // the role at start; the file stays current
			maps.Copy(env, member.Environment(role.Role, role.Epoch, role.Primary))
		}
	}
	if dns := s.agent.DNSAddress(); dns != "" {
		env = maps.Clone(env)
		if env == nil {
			env = map[string]string{}
		}
		env[DNSEnv] = dns
	}
	return runtime.Spec{
		ReplicaID: as.ReplicaID, Service: as.Service, MachineID: s.agent.machineID, SpecHash: as.SpecHash,
		Image: sp.Image, Command: sp.Command, Args: sp.Args, Env: env, WorkingDir: sp.WorkingDir,
		HostPorts: s.ports(), ContainerPort: containerPorts, MainPort: mainPort, StopTimeout: time.Duration(sp.StopTimeoutSeconds) * time.Second,
		MilliCPU: as.Requests.MilliCPU, MemoryBytes: as.Requests.MemoryBytes, EphemeralBytes: as.Requests.EphemeralBytes,
		GPUDeviceIDs: gpuIDs, RuntimeClass: as.RuntimeClass, SecretFiles: secretFiles, Address: as.Address, DNS: s.agent.containerDNS,
	}
}

// run is the supervisor's life; it returns once stopped.
func (s *supervisor) run(ctx context.Context) {
	defer close(s.done)
	cfg := s.agent.cfg
	backoff := cfg.RestartBackoff
	for {
		started := time.Now()
		outcome := s.runOnce(ctx)
		if outcome.stopped {
			return
		}
		if time.Since(started) > cfg.StableAfter {
			backoff = cfg.RestartBackoff
		}
		s.update(func(st *api.ReplicaStatus) {
			st.Health = api.HealthUnhealthy
			if outcome.startFailed {
				// Not a crash loop: the reason it cannot start stays visible.
				st.State, st.Message = api.ReplicaFailed, fmt.Sprintf("%s; retrying in %s", outcome.why, backoff)
				return
			}
			st.Restarts++
			st.State, st.Message = api.ReplicaCrashed, fmt.Sprintf("%s; restarting in %s", outcome.why, backoff)
		})
		s.agent.log.Warn("replica not running", "replica", s.assignment.ReplicaID, "why", outcome.why, "retryIn", backoff)
		select {
		case <-s.stop:
			return
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		s.repickPorts()
		backoff *= 2
		if backoff > cfg.MaxRestartBackoff {
			backoff = cfg.MaxRestartBackoff
		}
	}
}

// outcome is how one run of a replica ended.
type outcome struct {
	stopped     bool // the supervisor was told to stop
	startFailed bool
	why         string
}

// runOnce starts the task (or takes the adopted one) and waits for it to
// exit or for the supervisor to be stopped.
func (s *supervisor) runOnce(ctx context.Context) outcome {
	task := s.adopted
	s.adopted = nil
	if task == nil {
		var err error
		if task, err = s.agent.driver.Start(ctx, s.runtimeSpec()); err != nil {
			return outcome{startFailed: true, why: "failed to start: " + err.Error()}
		}
	}
	hc := s.assignment.Spec.HealthCheck
	s.mu.Lock()
	s.hostPorts, s.task = task.HostPorts(), task
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.task = nil
		s.mu.Unlock()
	}()
	s.update(func(st *api.ReplicaStatus) {
		st.Message = ""
		if hc == nil {
			st.State = api.ReplicaRunning
		} else {
			st.State, st.Health = api.ReplicaStarting, api.HealthUnknown
		}
	})
	probeCtx, stopProbes := context.WithCancel(ctx)
	defer stopProbes()
	if hc != nil {
		go s.probeLoop(probeCtx, hc, task)
	}
	select {
	case <-task.Done():
		// Release what the exited task holds (its container) before the
		// next start.
		_ = task.Stop(context.Background(), 0)
		if err := task.ExitError(); err != nil {
			return outcome{why: "exited: " + err.Error()}
		}
		return outcome{why: "exited with status 0"}
	case <-s.stop:
	case <-ctx.Done():
	}
	// Stop is bounded by the stop timeout, after which the task is killed.
	timeout := s.runtimeSpec().StopTimeout
	if s.stopTimeout > 0 {
		timeout = min(timeout, s.stopTimeout)
	}
	if err := task.Stop(context.Background(), timeout); err != nil {
		s.agent.log.Warn("stopping replica", "replica", s.assignment.ReplicaID, "err", err)
	}
	return outcome{stopped: true}
}

// probeLoop marks the replica running and healthy after a passing probe,
// and unhealthy after FailureThreshold failures in a row.
func (s *supervisor) probeLoop(ctx context.Context, hc *api.HealthCheck, task runtime.Task) {
	interval := time.Duration(hc.IntervalSeconds) * time.Second
	failures, successes := 0, 0
	ticker := time.NewTicker(s.agent.cfg.FirstProbeDelay)
	defer ticker.Stop()
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if first {
			ticker.Reset(interval)
			first = false
		}
		if err := probe(ctx, hc, task); err != nil {
			failures, successes = failures+1, 0
			if failures >= hc.FailureThreshold {
				s.update(func(st *api.ReplicaStatus) {
					st.Health, st.Message = api.HealthUnhealthy, "health check: "+err.Error()
				})
			}
			continue
		}
		failures, successes = 0, successes+1
		if successes < hc.SuccessThreshold && s.snapshot().Health != api.HealthHealthy {
			continue
		}
		s.update(func(st *api.ReplicaStatus) {
			st.State, st.Health, st.Message = api.ReplicaRunning, api.HealthHealthy, ""
		})
	}
}

// haltWithin stops the replica within timeout, then kills it.
func (s *supervisor) haltWithin(timeout time.Duration) {
	s.stopTimeout = timeout
	s.halt()
}

// halt stops the replica and waits for it.
func (s *supervisor) halt() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// withSecrets is a replica's environment: its plain values and the
// values of the Secrets it references.
// withSecrets adds the secret values to the environment, or, where the
// driver gives files and the spec does not ask for env, returns them as
// files (each named in the environment by its driver).
func withSecrets(env map[string]string, refs map[string]api.SecretKeyRef, secrets map[string]string, files bool) (map[string]string, map[string]string) {
	if len(secrets) == 0 {
		return env, nil
	}
	out := maps.Clone(env)
	if out == nil {
		out = map[string]string{}
	}
	var asFiles map[string]string
	for name, value := range secrets {
		if files && refs[name].As != api.SecretAsEnv {
			if asFiles == nil {
				asFiles = map[string]string{}
			}
			asFiles[name] = value
			continue
		}
		out[name] = value
	}
	return out, asFiles
}
