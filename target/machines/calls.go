// Package machines is the target of the machines Gantry provisions
// itself: the provider calls that carry out a pass's decisions (launch,
// terminate, describe, list, fence, stop and start), each in a worker,
// and what those calls observed for the next pass. Its decide side is
// in package decide (machines.go, capacity.go), as the Kubernetes
// target's is in package target/kube.
package machines

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/utils/clock"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/internal/randid"
	"github.com/gantry-dev/gantry/metrics"
	"github.com/gantry-dev/gantry/provider/registry"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/telemetry"
)

// Calls runs provider calls in workers: one call per subject at a time,
// at most Concurrency per provider instance, each bounded by
// ProviderTimeout. A worker records what its call did in the store
// (through the machine's lifecycle, package fleet) and leaves an outcome
// for the next pass to learn from, or hands what it observed to the
// Observations.
type Calls struct {
	cfg CallConfig
	Deps
	observed *Observations
	done     func()

	mu sync.Mutex
	// term is the leadership term's context: calls run under it and are
	// cancelled when the term ends, so none outlives the lease's margin.
	term     context.Context
	inflight map[string]bool
	slots    map[string]chan struct{}
	wg       sync.WaitGroup
}

// CallConfig tunes the provider calls.
type CallConfig struct {
	// ProviderTimeout bounds one provider call.
	ProviderTimeout time.Duration
	// Concurrency is how many calls run at once per provider instance.
	Concurrency int
	// ServerURL is what agents dial, unless their cluster's agent.apiUrl
	// says otherwise.
	ServerURL string
	// JoinTokenTTL is how long a launched machine's join token is valid.
	JoinTokenTTL time.Duration
	// InstallationID is tagged on every instance; recovery only ever
	// touches instances with this server's id.
	InstallationID string
	// ConsoleTailLines of a machine that never joined go into its event.
	ConsoleTailLines int
}

// Deps are what the calls work with.
type Deps struct {
	Store    store.Store
	Registry *registry.Registry
	Signer   *auth.Signer
	Clock    clock.PassiveClock
	Log      *slog.Logger
	// Metrics may be nil.
	Metrics *metrics.Metrics
	// Tracer traces the calls (nil: not traced).
	Tracer trace.Tracer
	// Leading reports whether this server still leads; calls are made
	// only while it does (nil: always).
	Leading func() bool
}

func (d Deps) tracer() trace.Tracer {
	if d.Tracer == nil {
		return noop.NewTracerProvider().Tracer("")
	}
	return d.Tracer
}

// NewCalls returns the calls of a controller: what they observe goes to
// observed, and done is called after each call ends (the controller's
// trigger of its next pass).
func NewCalls(cfg CallConfig, d Deps, observed *Observations, done func()) *Calls {
	return &Calls{cfg: cfg, Deps: d, observed: observed, done: done, term: context.Background(), inflight: map[string]bool{}, slots: map[string]chan struct{}{}}
}

// SetTerm makes ctx the context of the calls started from now on.
func (c *Calls) SetTerm(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.term = ctx
}

// start runs fn in a worker unless a call for the same subject runs; the
// calls of one provider instance share its Concurrency workers, so a
// provider that hangs holds only its own.
func (c *Calls) start(kind, subject, providerKey string, fn func(ctx context.Context)) {
	key := decide.CallKey(kind, subject)
	c.mu.Lock()
	if c.inflight[key] {
		c.mu.Unlock()
		return
	}
	c.inflight[key] = true
	term := c.term
	slot, ok := c.slots[providerKey]
	if !ok {
		slot = make(chan struct{}, max(c.cfg.Concurrency, 1))
		c.slots[providerKey] = slot
	}
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			delete(c.inflight, key)
			c.mu.Unlock()
			c.done()
		}()
		select {
		case slot <- struct{}{}:
		case <-term.Done():
			return
		}
		defer func() { <-slot }()
		if (c.Leading != nil && !c.Leading()) || term.Err() != nil {
			c.Log.Warn("provider call skipped: this server no longer leads", "call", kind, "subject", subject)
			return
		}
		ctx, cancel := context.WithTimeout(term, c.cfg.ProviderTimeout)
		defer cancel()
		ctx, span := c.tracer().Start(ctx, "gantry.provider."+kind, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("gantry.subject", subject), attribute.String("gantry.provider_key", providerKey)))
		defer span.End()
		fn(ctx)
	}()
}

// termEnded says a call's context was cancelled because its leadership
// term ended (not timed out): what it did not finish is the next
// leader's to do, and nothing of it is recorded.
func termEnded(ctx context.Context) bool { return errors.Is(ctx.Err(), context.Canceled) }

// InFlight are the calls under way, by decide.CallKey.
func (c *Calls) InFlight() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]bool, len(c.inflight))
	for k := range c.inflight {
		out[k] = true
	}
	return out
}

// Wait blocks until the calls under way have finished.
func (c *Calls) Wait() { c.wg.Wait() }

// machine reads a machine (and its cluster, when it still exists) and the
// provider instance it was launched through.
func (c *Calls) machine(id string) (*api.Machine, *api.Cluster, provisioner.Provisioner, error) {
	var m *api.Machine
	var cl *api.Cluster
	err := c.Store.View(context.Background(), func(tx store.Tx) error {
		var err error
		if m, err = tx.GetMachine(id); err != nil {
			return err
		}
		cl, err = tx.GetCluster(m.Cluster)
		if errors.Is(err, store.ErrNotFound) {
			cl, err = nil, nil
		}
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	prov, err := c.Registry.Get(registry.KeyOf(m))
	return m, cl, prov, err
}

// update changes a machine in a transaction, with an event and, when
// given, an outcome for the next pass.
func (c *Calls) update(id string, change func(*api.Machine) error, outcome *decide.Outcome, typ, reason, format string, args ...any) {
	now := c.Clock.Now()
	err := c.Store.Update(context.Background(), func(tx store.Tx) error {
		if outcome != nil {
			if err := putOutcome(tx, *outcome); err != nil {
				return err
			}
		}
		m, err := tx.GetMachine(id)
		if err != nil {
			return err
		}
		if change != nil {
			if err := change(m); err != nil {
				return err
			}
			if err := tx.PutMachine(m); err != nil {
				return err
			}
		}
		return store.Record(tx, now, typ, reason, "Machine", id, format, args...)
	})
	if err != nil {
		c.Log.Error("record provider call", "machine", id, "event", reason, "err", err)
	}
}

func putOutcome(tx store.Tx, o decide.Outcome) error {
	data, err := json.Marshal(o)
	if err != nil {
		return err
	}
	return tx.PutMemory(decide.OutcomeKey(o.Call+"-"+o.Machine+"-"+randid.Hex(6)), string(data))
}

func (c *Calls) outcome(call string, m *api.Machine, err error) *decide.Outcome {
	o := &decide.Outcome{Call: call, Machine: m.ID, Cluster: m.Cluster, Group: m.Group, InstanceType: m.InstanceType,
		Zone: m.Zone, CapacityType: m.CapacityType, At: c.Clock.Now()}
	if err != nil {
		o.Kind, o.Error = provisioner.KindOf(err), err.Error()
	}
	return o
}

// Launch sends a recorded intent to its provider (again, if need be: the
// Launch key makes it idempotent).
func (c *Calls) Launch(id, key string) {
	c.start(decide.CallLaunch, id, key, func(ctx context.Context) {
		m, cl, prov, err := c.machine(id)
		if err != nil || cl == nil || m.ProviderID != "" || m.JoinState != api.JoinProvisioning {
			if err != nil {
				c.Log.Warn("launch", "machine", id, "err", err)
			}
			return
		}
		token, err := c.Signer.Mint(auth.JoinClaims{Cluster: m.Cluster, Group: m.Group, MachineID: m.ID, ExpiresAt: c.Clock.Now().Add(c.cfg.JoinTokenTTL)})
		if err != nil {
			c.Log.Error("mint join token", "machine", id, "err", err)
			return
		}
		c.Log.Info("launching machine", "machine", m.ID, "cluster", m.Cluster, "group", m.Group, "instanceType", m.InstanceType)
		inst, launchErr := prov.Launch(ctx, c.launchSpec(m, cl, token))
		result := "launched"
		if launchErr != nil {
			result = string(cmp.Or(provisioner.KindOf(launchErr), "error"))
		}
		c.Metrics.Provisioned(prov.Name(), result)
		now := c.Clock.Now()
		if launchErr != nil && termEnded(ctx) {
			// The intent stays: the next leader sends it again, with the
			// same idempotency key.
			c.Log.Warn("launch cancelled: the leadership term ended", "machine", id)
			return
		}
		if launchErr != nil {
			telemetry.MarkFailed(trace.SpanFromContext(ctx), launchErr)
			c.Log.Warn("launch failed", "machine", id, "err", launchErr)
			c.update(id, func(m *api.Machine) error { return fleet.LaunchFailed(m, launchErr.Error(), now) }, c.outcome(decide.CallLaunch, m, launchErr),
				api.EventWarning, "LaunchFailed", "provider %s: %v", prov.Name(), launchErr)
			return
		}
		c.update(id, func(m *api.Machine) error { return fleet.Launched(m, *inst, now) }, c.outcome(decide.CallLaunch, m, nil),
			api.EventNormal, "Launched", "provider %s instance %s is %s", prov.Name(), inst.ID, inst.State)
	})
}

// launchSpec is what the provider gets: the machine, its tags, and the
// cluster's machine template and provider settings.
func (c *Calls) launchSpec(m *api.Machine, cl *api.Cluster, token string) provisioner.LaunchSpec {
	b := provisioner.Bootstrap{ServerURL: c.cfg.ServerURL, Cluster: m.Cluster, Group: m.Group, MachineID: m.ID, JoinToken: token, NetworkMode: cl.NetworkMode()}
	if a := cl.Spec.Agent; a != nil {
		if a.APIURL != "" {
			b.ServerURL = a.APIURL
		}
		b.TemplateVersion, b.AgentBinaries = a.Version, a.Binaries
	}
	return provisioner.LaunchSpec{InstanceType: m.InstanceType, CapacityType: m.CapacityType, Zone: m.Zone, IdempotencyKey: m.LaunchKey,
		Tags: Tags(m, c.cfg.InstallationID), Bootstrap: b, Region: cl.Spec.Provider.Region, Config: cl.Spec.Provider.Config, Subnet: m.Subnet}
}

// Tags are put on every instance at launch.
func Tags(m *api.Machine, installation string) map[string]string {
	return map[string]string{
		provisioner.TagManagedBy:    provisioner.ManagedByValue,
		provisioner.TagInstallation: installation,
		provisioner.TagCluster:      m.Cluster,
		provisioner.TagGroup:        m.Group,
		provisioner.TagLaunchKey:    m.LaunchKey,
		provisioner.TagMachine:      m.ID,
	}
}

// Terminate terminates a terminating machine's instance, then records it
// terminated (its /24 is free again). diagnose, when set, is why the
// machine never joined: its console is read first, and the event says
// how far its boot got.
func (c *Calls) Terminate(id, key, diagnose string) {
	c.start(decide.CallTerminate, id, key, func(ctx context.Context) {
		m, _, prov, err := c.machine(id)
		if err != nil {
			c.Log.Warn("terminate", "machine", id, "err", err)
			return
		}
		if m.FleetState != api.FleetTerminating {
			return
		}
		if diagnose != "" {
			c.diagnose(ctx, m, prov, diagnose)
		}
		ids, err := c.instancesOf(ctx, m, prov)
		for _, instance := range ids {
			if err != nil {
				break
			}
			err = confirmGone(ctx, prov, instance, false)
		}
		if err != nil && termEnded(ctx) {
			return
		}
		if err != nil {
			// Its /24 stays held until the instance is gone: a machine that
			// still runs may still answer at those addresses.
			log := c.Log.Warn
			if errors.Is(err, errNotGoneYet) {
				log = c.Log.Info
			}
			log("terminate not confirmed; will retry", "machine", id, "instance", m.ProviderID, "err", err)
			c.recordOutcome(c.outcome(decide.CallTerminate, m, err))
			return
		}
		now := c.Clock.Now()
		c.update(id, func(m *api.Machine) error { return fleet.SetFleetState(m, api.FleetTerminated, now) }, nil,
			api.EventNormal, "Terminated", "instance %s terminated; subnet %s released", cmp.Or(strings.Join(ids, ","), "(none)"), cmp.Or(m.Subnet, "(none)"))
	})
}

func (c *Calls) diagnose(ctx context.Context, m *api.Machine, prov provisioner.Provisioner, why string) {
	if reader, ok := prov.(provisioner.ConsoleReader); ok && m.ProviderID != "" {
		console, err := reader.ConsoleOutput(ctx, m.ProviderID)
		why = fleet.WithConsole(why, console, err, c.cfg.ConsoleTailLines)
	}
	c.update(m.ID, func(m *api.Machine) error { m.Reason = why; return nil }, nil, api.EventNormal, "Terminating", "%s", why)
}

func (c *Calls) recordOutcome(o *decide.Outcome) {
	if err := c.Store.Update(context.Background(), func(tx store.Tx) error { return putOutcome(tx, *o) }); err != nil {
		c.Log.Error("record provider call outcome", "machine", o.Machine, "err", err)
	}
}

// TerminateOrphan terminates a tagged instance no live machine owns.
func (c *Calls) TerminateOrphan(o decide.Orphan) {
	c.start(decide.CallTerminate, o.Instance.ID, o.ProviderKey, func(ctx context.Context) {
		prov, err := c.Registry.Get(o.ProviderKey)
		if err == nil {
			err = prov.Terminate(ctx, o.Instance.ID)
		}
		machine := o.Instance.Tags[provisioner.TagMachine]
		if err != nil {
			c.Log.Warn("terminate orphan", "instance", o.Instance.ID, "err", err)
			return
		}
		c.Log.Warn("terminated tagged instance the store does not know", "instance", o.Instance.ID, "machine", machine)
		now := c.Clock.Now()
		if err := c.Store.Update(context.Background(), func(tx store.Tx) error {
			return store.Record(tx, now, api.EventWarning, "OrphanTerminated", "Machine", machine,
				"instance %s was tagged by this server but no live machine owns it; terminated", o.Instance.ID)
		}); err != nil {
			c.Log.Error("record orphan termination", "instance", o.Instance.ID, "err", err)
		}
	})
}

// Describe looks up a machine's instance for the next pass.
func (c *Calls) Describe(id, key string) {
	c.start(decide.CallDescribe, id, key, func(ctx context.Context) {
		m, _, prov, err := c.machine(id)
		if err != nil || m.ProviderID == "" {
			return
		}
		inst, err := prov.Describe(ctx, m.ProviderID)
		switch {
		case errors.Is(err, provisioner.ErrNotFound):
			c.observed.described(id, decide.InstanceObservation{Found: false, At: c.Clock.Now()})
		case err != nil:
			c.Log.Warn("describe", "machine", id, "instance", m.ProviderID, "err", err)
		default:
			c.observed.described(id, decide.InstanceObservation{Found: true, State: inst.State, At: c.Clock.Now()})
		}
	})
}

// List lists a provider instance's tagged instances for recovery.
func (c *Calls) List(key string) {
	c.start(decide.CallList, key, key, func(ctx context.Context) {
		prov, err := c.Registry.Get(key)
		if err != nil {
			c.Log.Warn("list instances", "provider", key, "err", err)
			return
		}
		at := c.Clock.Now()
		instances, err := prov.List(ctx, provisioner.Filter{Tags: map[string]string{
			provisioner.TagManagedBy: provisioner.ManagedByValue, provisioner.TagInstallation: c.cfg.InstallationID,
		}})
		if err != nil {
			c.Log.Warn("list instances", "provider", key, "err", err)
			return
		}
		c.observed.Listed(key, decide.Inventory{Instances: instances, At: at})
		if fw, ok := prov.(provisioner.MeshFirewaller); ok {
			c.sweepMeshFirewalls(ctx, key, fw, instances)
		}
	})
}

// sweepMeshFirewalls lets a provider delete the overlay firewalls it made
// for clusters that are gone and hold no instance any more.
func (c *Calls) sweepMeshFirewalls(ctx context.Context, key string, fw provisioner.MeshFirewaller, instances []provisioner.Instance) {
	keep := map[string]bool{}
	for _, inst := range instances {
		keep[inst.Tags[provisioner.TagCluster]] = true
	}
	err := c.Store.View(ctx, func(tx store.Tx) error {
		clusters, err := tx.ListClusters()
		for _, cl := range clusters {
			keep[cl.Metadata.Name] = true
		}
		return err
	})
	if err == nil {
		err = fw.SweepMeshFirewalls(ctx, c.cfg.InstallationID, keep)
	}
	if err != nil {
		c.Log.Warn("sweep the overlays' firewalls", "provider", key, "err", err)
	}
}

// WarmPool stops or starts a warm-pool machine's instance; a started one
// gets the addresses the provider returns.
func (c *Calls) WarmPool(call string, step decide.MachineStep, key string) {
	c.start(call, step.Machine, key, func(ctx context.Context) {
		m, _, prov, err := c.machine(step.Machine)
		if err != nil {
			c.Log.Warn(call, "machine", step.Machine, "err", err)
			return
		}
		stopper, ok := prov.(provisioner.Stopper)
		if !ok {
			err = provisioner.Errorf(provisioner.KindUnsupported, call, "provider %s cannot stop and start instances", prov.Name())
		}
		var inst *provisioner.Instance
		if err == nil && call == decide.CallStart {
			inst, err = stopper.Start(ctx, m.ProviderID)
		} else if err == nil {
			err = stopper.Stop(ctx, m.ProviderID)
		}
		if err != nil {
			c.update(step.Machine, nil, c.outcome(call, m, err), api.EventWarning, "WarmPool", "%s %s: %v", call, m.ID, err)
			return
		}
		now := c.Clock.Now()
		if call == decide.CallStart {
			c.update(step.Machine, func(m *api.Machine) error { return fleet.Started(m, inst.Addresses, now) }, nil,
				api.EventNormal, "Started", "%s (addresses %v)", step.Reason, inst.Addresses)
			return
		}
		c.update(step.Machine, func(m *api.Machine) error { return fleet.Stopped(m, now) }, nil, api.EventNormal, "Stopped", "%s", step.Reason)
	})
}
