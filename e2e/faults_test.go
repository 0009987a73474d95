package e2e

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/faulty"
	gantryserver "github.com/gantry-dev/gantry/server"
)

// inProcess runs a server in this process whose provider is wrapped with
// faults; its machines are real agent processes of the built binary.
type inProcess struct {
	*gantryserver.Server
	api    *client.Client
	faults *faulty.Provider
	dir    string
}

func startFaulty(t *testing.T, faults faulty.Config) *inProcess {
	t.Helper()
	dir := t.TempDir()
	cfg := gantryserver.DefaultConfig(dir)
	cfg.Listen, cfg.LocalAgentBinary, cfg.LocalExitWithServer, cfg.LocalStopGrace = "127.0.0.1:0", gantryBin, true, 3*time.Second
	d := &cfg.Controller.Decide
	cfg.Controller.Interval, d.HeartbeatInterval = 200*time.Millisecond, 300*time.Millisecond
	d.LaunchBackoff, d.MaxLaunchBackoff, d.RescheduleGrace = 500*time.Millisecond, 4*time.Second, time.Second
	d.UnavailableTTL = 2 * time.Second // the group has one offering: a miss must not block it for long
	cfg.Controller.Calls.ProviderTimeout, d.TerminateBackoff, d.JoinTimeout = 10*time.Second, 200*time.Millisecond, 30*time.Second
	ip := &inProcess{dir: dir}
	cfg.WrapProvider = func(p provisioner.Provisioner) provisioner.Provisioner {
		if p.Name() != "local" {
			return p // the tests' clusters are local; one wrapper to steer
		}
		ip.faults = faulty.Wrap(p, faults)
		return ip.faults
	}
	srv, err := gantryserver.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ip.Server = srv
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		ip.faults.SetConfig(faulty.Config{})
		_ = srv.TerminateAll(context.Background(), "test over", nil)
		srv.Close()
		killMachines(dir)
	})
	ip.api = client.New(srv.URL(), srv.AdminToken(), trustingClient(dir, 10*time.Second))
	return ip
}

func (ip *inProcess) apply(t *testing.T, spec string) {
	t.Helper()
	if _, err := ip.api.Apply(context.Background(), []byte(spec)); err != nil {
		t.Fatal(err)
	}
}

func (ip *inProcess) machines(t *testing.T) []api.Machine {
	t.Helper()
	ms, err := ip.api.ListMachines(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

const faultSpec = `kind: Cluster
metadata: {name: f}
spec:
  capacityGroups:
    - {groupId: g, instanceType: local.small, minSize: 1, maxSize: 5, capacityType: CAPACITY}
---
kind: Service
metadata: {name: web}
spec:
  cluster: f
  command: [gantry, hello]
  ports: [{name: http}]
  replicas: 3
  resources: {cpu: 600m, memory: 128Mi}
`

// 30% of provider calls fail with one error kind, some launches lose their
// answer, some calls stall: the fleet converges anyway, with no leaked or
// doubled instance.
func TestFleetConvergesThroughProviderFaults(t *testing.T) {
	kinds := []provisioner.ErrorKind{provisioner.KindTransport, provisioner.KindInsufficientCapacity, provisioner.KindAuth, provisioner.KindNotFound, provisioner.KindUnsupported}
	for i, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			ip := startFaulty(t, faulty.Config{Rate: 0.3, Kinds: []provisioner.ErrorKind{kind}, FailFirst: 2, PartialLaunch: 0.2,
				SpikeRate: 0.1, Spike: 300 * time.Millisecond, Seed: uint64(100 + i)})
			ip.apply(t, strings.Replace(faultSpec, "CAPACITY", "onDemand", 1))
			waitFor(t, "3 replicas answering through faults", func() (bool, string) {
				rs, err := ip.api.ListReplicas(context.Background(), "web")
				if err != nil {
					return false, err.Error()
				}
				if ok, why := allAnswer(rs, 3); !ok {
					return false, why
				}
				return fleetConsistent(ip.machines(t), ip.dir)
			})
			injected := ip.faults.Injected()
			if injected["Launch/"+string(kind)]+injected["Describe/"+string(kind)]+injected["List/"+string(kind)]+injected["Terminate/"+string(kind)] == 0 {
				t.Fatalf("no %s fault was injected: %v", kind, injected)
			}
			t.Logf("injected %v", injected)
		})
	}
}

// Spot is out of capacity: the planner remembers the miss and falls back to
// on-demand (capacityType: any).
func TestCapacityMissFallsBackToOnDemand(t *testing.T) {
	ip := startFaulty(t, faulty.Config{Rate: 1, Kinds: []provisioner.ErrorKind{provisioner.KindInsufficientCapacity}, Seed: 1,
		LaunchFilter: func(s provisioner.LaunchSpec) bool { return s.CapacityType == api.CapacitySpot }})
	ip.apply(t, strings.Replace(faultSpec, "CAPACITY", "any", 1))
	waitFor(t, "replicas on on-demand machines", func() (bool, string) {
		rs, _ := ip.api.ListReplicas(context.Background(), "web")
		return allAnswer(rs, 3)
	})
	for _, m := range ip.machines(t) {
		if m.CapacityType != api.CapacityOnDemand {
			t.Fatalf("machine %s is %s: spot kept failing", m.ID, m.CapacityType)
		}
	}
	if ip.faults.Injected()["Launch/insufficient-capacity"] == 0 {
		t.Fatal("spot was never tried first")
	}
}

// The provider refuses the credentials: the cluster shows the condition,
// launches back off instead of looping, and recover when auth works.
func TestAuthErrorsBecomeAConditionWithBackoff(t *testing.T) {
	ip := startFaulty(t, faulty.Config{Rate: 1, Kinds: []provisioner.ErrorKind{provisioner.KindAuth}, Ops: []string{"Launch"}, Seed: 1})
	ip.apply(t, strings.Replace(faultSpec, "CAPACITY", "onDemand", 1))
	waitFor(t, "the ProviderReady=False condition", func() (bool, string) {
		c, err := ip.api.GetCluster(context.Background(), "f")
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == api.ConditionProviderReady && cond.Status == "False" && strings.Contains(cond.Message, "auth") {
				return true, ""
			}
		}
		return false, "no condition yet"
	})
	before := ip.faults.Injected()["Launch/auth"]
	waitPasses(t, ip.dir, ip.URL(), 15) // a loop without backoff would try 15 times
	if tries := ip.faults.Injected()["Launch/auth"] - before; tries > 5 {
		t.Fatalf("%d launch attempts in 15 passes: no backoff", tries)
	}
	ip.faults.SetConfig(faulty.Config{})
	waitFor(t, "recovery once auth works", func() (bool, string) {
		rs, _ := ip.api.ListReplicas(context.Background(), "web")
		if ok, why := allAnswer(rs, 3); !ok {
			return false, why
		}
		c, _ := ip.api.GetCluster(context.Background(), "f")
		for _, cond := range c.Status.Conditions {
			if cond.Type == api.ConditionProviderReady && cond.Status == "True" {
				return true, ""
			}
		}
		return false, "condition not cleared"
	})
}
