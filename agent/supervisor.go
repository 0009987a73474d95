package agent

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/runtime"
)

// supervisor keeps one replica running: it starts the task, restarts it
// with exponential backoff when it exits, and probes its health.
type supervisor struct {
	agent      *Agent
	assignment api.Assignment
	hostPorts  map[string]int

	mu     sync.Mutex
	status api.ReplicaStatus

	stop chan struct{}
	done chan struct{}
}

func newSupervisor(a *Agent, as api.Assignment) (*supervisor, error) {
	ports, err := freePorts(as.Spec.Ports)
	if err != nil {
		return nil, err
	}
	s := &supervisor{agent: a, assignment: as, hostPorts: ports, stop: make(chan struct{}), done: make(chan struct{})}
	s.status = api.ReplicaStatus{ReplicaID: as.ReplicaID, SpecHash: as.SpecHash, State: api.ReplicaStarting, Health: api.HealthUnknown, HostPorts: ports}
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

func (s *supervisor) snapshot() api.ReplicaStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.HostPorts = s.hostPorts
	return st
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
	sp := s.assignment.Spec
	containerPorts := map[string]int{}
	for _, p := range sp.Ports {
		containerPorts[p.Name] = p.ContainerPort
	}
	return runtime.Spec{
		ReplicaID: s.assignment.ReplicaID, Service: s.assignment.Service, MachineID: s.agent.machineID, SpecHash: s.assignment.SpecHash,
		Image: sp.Image, Command: sp.Command, Args: sp.Args, Env: sp.Env, WorkingDir: sp.WorkingDir,
		HostPorts: s.hostPorts, ContainerPort: containerPorts, StopTimeout: time.Duration(sp.StopTimeoutSeconds) * time.Second,
		MilliCPU: s.assignment.Requests.MilliCPU, MemoryBytes: s.assignment.Requests.MemoryBytes,
	}
}

// run is the supervisor's life; it returns once stopped.
func (s *supervisor) run(ctx context.Context) {
	defer close(s.done)
	cfg := s.agent.cfg
	backoff := cfg.RestartBackoff
	for {
		started := time.Now()
		exitMsg, stopped := s.runOnce(ctx)
		if stopped {
			return
		}
		if time.Since(started) > cfg.StableAfter {
			backoff = cfg.RestartBackoff
		}
		s.update(func(st *api.ReplicaStatus) {
			st.Restarts++
			st.State, st.Health = api.ReplicaCrashed, api.HealthUnhealthy
			st.Message = fmt.Sprintf("%s; restarting in %s", exitMsg, backoff)
		})
		s.agent.log.Warn("replica exited", "replica", s.assignment.ReplicaID, "why", exitMsg, "restartIn", backoff)
		select {
		case <-s.stop:
			return
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff *= 2
		if backoff > cfg.MaxRestartBackoff {
			backoff = cfg.MaxRestartBackoff
		}
	}
}

// runOnce starts the task and waits for it to exit (false) or for the
// supervisor to be stopped (true).
func (s *supervisor) runOnce(ctx context.Context) (string, bool) {
	task, err := s.agent.driver.Start(ctx, s.runtimeSpec())
	if err != nil {
		return "failed to start: " + err.Error(), false
	}
	hc := s.assignment.Spec.HealthCheck
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
		go s.probeLoop(probeCtx, hc)
	}
	select {
	case <-task.Done():
		if err := task.ExitError(); err != nil {
			return "exited: " + err.Error(), false
		}
		return "exited with status 0", false
	case <-s.stop:
	case <-ctx.Done():
	}
	// Stop is bounded by the stop timeout, after which the task is killed.
	_ = task.Stop(context.Background(), s.runtimeSpec().StopTimeout)
	return "", true
}

// probeLoop marks the replica running and healthy after a passing probe,
// and unhealthy after FailureThreshold failures in a row.
func (s *supervisor) probeLoop(ctx context.Context, hc *api.HealthCheck) {
	interval := time.Duration(hc.IntervalSeconds) * time.Second
	failures := 0
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
		if err := probe(ctx, hc, s.hostPorts); err != nil {
			failures++
			if failures >= hc.FailureThreshold {
				s.update(func(st *api.ReplicaStatus) {
					st.Health, st.Message = api.HealthUnhealthy, "health check: "+err.Error()
				})
			}
			continue
		}
		failures = 0
		s.update(func(st *api.ReplicaStatus) {
			st.State, st.Health, st.Message = api.ReplicaRunning, api.HealthHealthy, ""
		})
	}
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
