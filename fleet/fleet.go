// Package fleet brings machines into being and out of it through a
// provisioner: every launch intent is committed to the store before the
// provider is called, and every instance is tagged so a restarted server
// finds it again.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/auth"
	"github.com/gantry-dev/gantry/metrics"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// Config tunes the fleet.
type Config struct {
	// ServerURL is the address agents dial to join.
	ServerURL string
	// JoinTokenTTL is how long a launched machine's join token is valid.
	JoinTokenTTL time.Duration
	// LaunchTimeout is how long an instance may take to be running.
	LaunchTimeout time.Duration
	// JoinTimeout is how long a launched machine may take to join.
	JoinTimeout time.Duration
	// ProviderTimeout bounds one provider call.
	ProviderTimeout time.Duration
	// ConsoleTailLines of a machine that never joined go into the event.
	ConsoleTailLines int
	// TerminateBackoff is the first wait after a failed terminate; it
	// doubles up to MaxTerminateBackoff. A machine still terminating after
	// StuckAfter is reported.
	TerminateBackoff    time.Duration
	MaxTerminateBackoff time.Duration
	StuckAfter          time.Duration
	// OrphanGrace: a tagged instance the store does not know is terminated
	// on recovery only once it is older than this.
	OrphanGrace time.Duration
	// InstallationID is tagged on every instance; recovery only ever
	// touches instances with this server's id.
	InstallationID string
}

// DefaultConfig returns production defaults.
func DefaultConfig(serverURL, installationID string) Config {
	return Config{ServerURL: serverURL, InstallationID: installationID, JoinTokenTTL: 15 * time.Minute,
		LaunchTimeout: 5 * time.Minute, JoinTimeout: 10 * time.Minute, ProviderTimeout: time.Minute,
		TerminateBackoff: 5 * time.Second, MaxTerminateBackoff: 5 * time.Minute, StuckAfter: 15 * time.Minute, OrphanGrace: 2 * time.Minute,
		ConsoleTailLines: 20}
}

// retry is the backoff state of a machine whose termination failed.
type retry struct {
	attempts int
	next     time.Time
	reported bool
}

// Fleet launches and terminates machines.
type Fleet struct {
	cfg       Config
	store     store.Store
	providers *Providers
	signer    *auth.Signer
	log       *slog.Logger

	metrics *metrics.Metrics

	mu          sync.Mutex
	terminating map[string]bool
	retries     map[string]*retry
	wg          sync.WaitGroup
}

// Causes of termination (the label of the terminations metric).
const (
	CauseUnreachable   = "unreachable"
	CauseJoinTimeout   = "join-timeout"
	CauseLaunchTimeout = "launch-timeout"
	CauseVanished      = "vanished"
	CauseConsolidated  = "consolidated"
	CauseRemoved       = "removed-from-spec"
	CauseShutdown      = "shutdown"
	CauseDrained       = "drained"
	CauseRollout       = "rollout"
)

// New returns a fleet; m may be nil.
func New(cfg Config, st store.Store, providers *Providers, signer *auth.Signer, log *slog.Logger, m *metrics.Metrics) *Fleet {
	return &Fleet{cfg: cfg, store: st, providers: providers, signer: signer, log: log, metrics: m, terminating: map[string]bool{}, retries: map[string]*retry{}}
}

// Launch records a launch intent for one machine of the group, then asks
// the provider for it. A failed provider call leaves the machine failed,
// with the reason in an event.
func (f *Fleet) Launch(ctx context.Context, c *api.Cluster, g api.CapacityGroup, it provisioner.InstanceType, o provisioner.Offering, reason string) error {
	key, prov, err := f.providers.For(c.Spec.Provider)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", c.Metadata.Name, err)
	}
	m, err := f.recordIntent(ctx, c, g, it, o, key, reason)
	if err != nil {
		return err
	}
	return f.callLaunch(ctx, prov, m)
}

func (f *Fleet) recordIntent(ctx context.Context, c *api.Cluster, g api.CapacityGroup, it provisioner.InstanceType, o provisioner.Offering, providerKey, reason string) (*api.Machine, error) {
	now := time.Now().UTC()
	m := &api.Machine{
		ID: machineName(c.Metadata.Name, g.GroupID), Cluster: c.Metadata.Name, Group: g.GroupID,
		InstanceType: it.Name, CapacityType: o.CapacityType, Zone: o.Zone, PricePerHour: o.PricePerHour,
		LaunchKey: "lk-" + hexID(12), Provider: c.Spec.Provider.Name, ProviderKey: providerKey, TemplateHash: spec.TemplateHash(c, g.GroupID),
		JoinState: api.JoinProvisioning, FleetState: api.FleetReady, Labels: g.Labels,
		Capacity:  api.Resources{MilliCPU: it.MilliCPU, MemoryBytes: it.MemoryBytes, EphemeralBytes: it.EphemeralBytes, GPUs: it.GPUCount()},
		CreatedAt: now, StateChangedAt: now,
	}
	err := f.store.Update(ctx, func(tx store.Tx) error {
		machines, err := tx.ListMachines(store.MachineFilter{Cluster: c.Metadata.Name, LiveOnly: true})
		if err != nil {
			return err
		}
		if m.Subnet, err = NextSubnet(c.Spec.ContainerCIDR, machines); err != nil {
			return err
		}
		if err := tx.PutMachine(m); err != nil {
			return err
		}
		return store.Record(tx, api.EventNormal, "Launching", "Machine", m.ID,
			"launching %s (%s, %s, $%.4f/h) in group %s/%s (subnet %s): %s", it.Name, orNone(o.Zone), o.CapacityType, o.PricePerHour, c.Metadata.Name, g.GroupID, m.Subnet, reason)
	})
	if err != nil {
		return nil, fmt.Errorf("record launch intent for %s/%s: %w", c.Metadata.Name, g.GroupID, err)
	}
	f.log.Info("launching machine", "machine", m.ID, "cluster", m.Cluster, "group", m.Group, "instanceType", it.Name, "reason", reason)
	return m, nil
}

// callLaunch calls the provider for a recorded intent; retrying it with the
// same launch key never makes a second instance.
func (f *Fleet) callLaunch(ctx context.Context, prov provisioner.Provisioner, m *api.Machine) error {
	token, err := f.signer.Mint(auth.JoinClaims{Cluster: m.Cluster, Group: m.Group, MachineID: m.ID, ExpiresAt: time.Now().Add(f.cfg.JoinTokenTTL)})
	if err != nil {
		return err
	}
	spec := provisioner.LaunchSpec{
		InstanceType: m.InstanceType, CapacityType: m.CapacityType, Zone: m.Zone, IdempotencyKey: m.LaunchKey,
		Tags:      f.Tags(m),
		Bootstrap: provisioner.Bootstrap{ServerURL: f.cfg.ServerURL, Cluster: m.Cluster, Group: m.Group, MachineID: m.ID, JoinToken: token},
	}
	if err := f.store.View(ctx, func(tx store.Tx) error {
		c, err := tx.GetCluster(m.Cluster)
		if err == nil {
			spec.Region, spec.Config = c.Spec.Provider.Region, c.Spec.Provider.Config
		}
		return err
	}); err != nil {
		return fmt.Errorf("launch %s: cluster settings: %w", m.ID, err)
	}
	callCtx, cancel := context.WithTimeout(ctx, f.cfg.ProviderTimeout)
	defer cancel()
	inst, launchErr := prov.Launch(callCtx, spec)
	result := "launched"
	if launchErr != nil {
		result = string(provisioner.KindOf(launchErr))
		if result == "" {
			result = "error"
		}
	}
	f.metrics.Provisioned(prov.Name(), result)
	err = f.store.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.GetMachine(m.ID)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		if launchErr != nil {
			if err := SetJoinState(cur, api.JoinFailed, now); err != nil {
				return err
			}
			if err := SetFleetState(cur, api.FleetTerminated, now); err != nil {
				return err
			}
			cur.Reason = launchErr.Error()
			if err := tx.PutMachine(cur); err != nil {
				return err
			}
			return store.Record(tx, api.EventWarning, "LaunchFailed", "Machine", m.ID, "provider %s: %v", prov.Name(), launchErr)
		}
		cur.ProviderID, cur.Addresses = inst.ID, inst.Addresses
		if inst.Zone != "" {
			cur.Zone = inst.Zone
		}
		if cur.JoinState == api.JoinProvisioning {
			if err := SetJoinState(cur, api.JoinBooting, now); err != nil {
				return err
			}
		}
		if err := tx.PutMachine(cur); err != nil {
			return err
		}
		return store.Record(tx, api.EventNormal, "Launched", "Machine", m.ID, "provider %s instance %s is %s", prov.Name(), inst.ID, inst.State)
	})
	if err != nil {
		return fmt.Errorf("record launch of %s: %w", m.ID, err)
	}
	if launchErr != nil {
		return fmt.Errorf("launch %s: %w", m.ID, launchErr)
	}
	return nil
}

// Tags are put on every instance at launch.
func (f *Fleet) Tags(m *api.Machine) map[string]string {
	return map[string]string{
		provisioner.TagManagedBy:    provisioner.ManagedByValue,
		provisioner.TagInstallation: f.cfg.InstallationID,
		provisioner.TagCluster:      m.Cluster,
		provisioner.TagGroup:        m.Group,
		provisioner.TagLaunchKey:    m.LaunchKey,
		provisioner.TagMachine:      m.ID,
	}
}

// Terminate marks a machine terminating, returns its replicas to pending,
// and terminates its instance in the background. It is idempotent.
func (f *Fleet) Terminate(ctx context.Context, machineID, cause, reason string) error {
	counted := false
	var m *api.Machine
	err := f.store.Update(ctx, func(tx store.Tx) error {
		var err error
		if m, err = tx.GetMachine(machineID); err != nil {
			return err
		}
		if m.FleetState == api.FleetTerminated {
			return nil
		}
		if m.FleetState != api.FleetTerminating {
			if err := SetFleetState(m, api.FleetTerminating, time.Now().UTC()); err != nil {
				return err
			}
			m.Reason, counted = reason, true
			if err := tx.PutMachine(m); err != nil {
				return err
			}
			if err := store.Record(tx, api.EventNormal, "Terminating", "Machine", m.ID, "%s", reason); err != nil {
				return err
			}
		}
		return UnassignReplicas(tx, m.ID, "machine "+m.ID+" is terminating: "+reason)
	})
	if err != nil || m.FleetState == api.FleetTerminated {
		return err
	}
	if counted {
		f.metrics.Terminated(cause)
	}
	f.terminateInBackground(m)
	return nil
}

// UnassignReplicas returns every replica of a machine to pending; replicas
// that were moving off it keep their new machine.
func UnassignReplicas(tx store.Tx, machineID, why string) error {
	moving, err := tx.ListReplicas(store.ReplicaFilter{PreviousMachine: machineID})
	if err != nil {
		return err
	}
	for _, r := range moving {
		r.PreviousMachine = ""
		if err := tx.PutReplica(r); err != nil {
			return err
		}
	}
	replicas, err := tx.ListReplicas(store.ReplicaFilter{Machine: machineID})
	if err != nil {
		return err
	}
	for _, r := range replicas {
		r.Machine, r.State, r.Reason, r.Health, r.HostPorts, r.Address = "", api.ReplicaPending, why, "", nil, ""
		r.UpdatedAt = time.Now().UTC()
		if err := tx.PutReplica(r); err != nil {
			return err
		}
		if err := store.Record(tx, api.EventNormal, "Rescheduling", "Replica", r.ID, "%s", why); err != nil {
			return err
		}
	}
	return nil
}

func (f *Fleet) terminateInBackground(m *api.Machine) {
	f.mu.Lock()
	if r := f.retries[m.ID]; f.terminating[m.ID] || (r != nil && time.Now().Before(r.next)) {
		f.mu.Unlock()
		return
	}
	f.terminating[m.ID] = true
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer func() {
			f.mu.Lock()
			delete(f.terminating, m.ID)
			f.mu.Unlock()
		}()
		f.finishTermination(m)
	}()
}

func (f *Fleet) finishTermination(m *api.Machine) {
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.ProviderTimeout)
	defer cancel()
	if prov, ok := f.providerOf(m); ok && m.ProviderID != "" {
		if err := prov.Terminate(ctx, m.ProviderID); err != nil {
			f.terminateFailed(ctx, m, err)
			return // the machine stays terminating; a later pass retries
		}
	}
	f.mu.Lock()
	delete(f.retries, m.ID)
	f.mu.Unlock()
	err := f.store.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.GetMachine(m.ID)
		if err != nil {
			return err
		}
		if err := SetFleetState(cur, api.FleetTerminated, time.Now().UTC()); err != nil {
			return err
		}
		if err := tx.PutMachine(cur); err != nil {
			return err
		}
		return store.Record(tx, api.EventNormal, "Terminated", "Machine", m.ID, "instance %s terminated; subnet %s released", orNone(m.ProviderID), m.Subnet)
	})
	if err != nil {
		f.log.Error("record termination", "machine", m.ID, "err", err)
	}
}

// terminateFailed backs off the next attempt and reports a machine that
// has been terminating for longer than StuckAfter, once.
func (f *Fleet) terminateFailed(ctx context.Context, m *api.Machine, err error) {
	f.mu.Lock()
	r := f.retries[m.ID]
	if r == nil {
		r = &retry{}
		f.retries[m.ID] = r
	}
	wait := f.cfg.TerminateBackoff << r.attempts
	if wait > f.cfg.MaxTerminateBackoff || wait <= 0 {
		wait = f.cfg.MaxTerminateBackoff
	}
	r.attempts++
	r.next = time.Now().Add(wait)
	stuck := !r.reported && time.Since(m.StateChangedAt) > f.cfg.StuckAfter
	r.reported = r.reported || stuck
	attempts := r.attempts
	f.mu.Unlock()
	f.log.Warn("terminate failed; will retry", "machine", m.ID, "instance", m.ProviderID, "attempt", attempts, "retryIn", wait, "err", err)
	if stuck {
		_ = f.store.Update(ctx, func(tx store.Tx) error {
			return store.Record(tx, api.EventWarning, "TerminateStuck", "Machine", m.ID,
				"still terminating after %s and %d attempts: %v", f.cfg.StuckAfter, attempts, err)
		})
	}
}

func (f *Fleet) providerOf(m *api.Machine) (provisioner.Provisioner, bool) {
	p, err := f.providers.Get(KeyOf(m))
	if err != nil {
		f.log.Error("no provider for machine", "machine", m.ID, "provider", KeyOf(m), "err", err)
		return nil, false
	}
	return p, true
}

// Wait blocks until background terminations finish.
func (f *Fleet) Wait() { f.wg.Wait() }

// Check follows machines that have not joined: an instance that vanished is
// marked terminated, one that takes too long to join is replaced, and a
// machine stuck terminating is retried.
func (f *Fleet) Check(ctx context.Context, machines []*api.Machine, now time.Time) {
	for _, m := range machines {
		switch {
		case m.FleetState == api.FleetTerminating:
			f.terminateInBackground(m)
		case m.FleetState == api.FleetTerminated || m.JoinState == api.JoinJoined:
		case m.JoinState == api.JoinProvisioning && m.ProviderID == "" && now.Sub(m.CreatedAt) > f.cfg.ProviderTimeout:
			f.retryLaunch(ctx, m)
		case now.Sub(m.CreatedAt) > f.cfg.JoinTimeout:
			_ = f.Terminate(ctx, m.ID, CauseJoinTimeout, f.joinTimeoutReason(ctx, m))
		case m.ProviderID != "":
			f.checkInstance(ctx, m)
		}
	}
}

// retryLaunch re-sends an intent whose provider call never returned (for
// example the server died during it); the launch key makes it idempotent.
func (f *Fleet) retryLaunch(ctx context.Context, m *api.Machine) {
	prov, ok := f.providerOf(m)
	if !ok {
		return
	}
	if err := f.callLaunch(ctx, prov, m); err != nil {
		f.log.Warn("retry launch", "machine", m.ID, "err", err)
	}
}

func (f *Fleet) checkInstance(ctx context.Context, m *api.Machine) {
	prov, ok := f.providerOf(m)
	if !ok {
		return
	}
	inst, err := prov.Describe(ctx, m.ProviderID)
	gone := errors.Is(err, provisioner.ErrNotFound) || (err == nil && (inst.State == provisioner.StateTerminated || inst.State == provisioner.StateTerminating))
	switch {
	case gone:
		_ = f.Terminate(ctx, m.ID, CauseVanished, "instance "+m.ProviderID+" disappeared before joining")
	case err == nil && inst.State != provisioner.StateRunning && time.Since(m.CreatedAt) > f.cfg.LaunchTimeout:
		_ = f.Terminate(ctx, m.ID, CauseLaunchTimeout, fmt.Sprintf("instance %s not running within %s (it is %s)", m.ProviderID, f.cfg.LaunchTimeout, inst.State))
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// Drain marks a machine draining: nothing new lands on it, its replicas
// move (each new copy running before the old one stops), and it is
// terminated once empty, or at the deadline.
func (f *Fleet) Drain(ctx context.Context, machineID, reason string, deadline time.Time) error {
	return f.store.Update(ctx, func(tx store.Tx) error {
		m, err := tx.GetMachine(machineID)
		if err != nil {
			return err
		}
		if m.FleetState == api.FleetDraining {
			return nil
		}
		if err := SetFleetState(m, api.FleetDraining, time.Now().UTC()); err != nil {
			return err
		}
		d := deadline.UTC()
		m.DrainDeadline, m.Reason = &d, reason
		if err := tx.PutMachine(m); err != nil {
			return err
		}
		return store.Record(tx, api.EventNormal, "Draining", "Machine", m.ID, "%s (deadline %s)", reason, d.Format(time.RFC3339))
	})
}

// Stop stops an idle machine's instance for the warm pool.
func (f *Fleet) Stop(ctx context.Context, machineID, reason string) error {
	return f.warmPoolMove(ctx, machineID, api.FleetReady, api.FleetStopped, func(ctx context.Context, p provisioner.Provisioner, m *api.Machine) (*provisioner.Instance, error) {
		return nil, p.Stop(ctx, m.ProviderID)
	}, "Stopped", reason)
}

// Start starts a stopped warm-pool machine; the addresses Start returns
// replace the old ones, and the machine gets a fresh heartbeat window.
func (f *Fleet) Start(ctx context.Context, machineID, reason string) error {
	return f.warmPoolMove(ctx, machineID, api.FleetStopped, api.FleetReady, func(ctx context.Context, p provisioner.Provisioner, m *api.Machine) (*provisioner.Instance, error) {
		return p.Start(ctx, m.ProviderID)
	}, "Started", reason)
}

// warmPoolMove calls the provider for a machine in state from, then records
// state to (with the instance's new addresses, if it returned one).
func (f *Fleet) warmPoolMove(ctx context.Context, machineID, from, to string, call func(context.Context, provisioner.Provisioner, *api.Machine) (*provisioner.Instance, error), eventReason, reason string) error {
	var m *api.Machine
	if err := f.store.View(ctx, func(tx store.Tx) error {
		var err error
		m, err = tx.GetMachine(machineID)
		return err
	}); err != nil {
		return err
	}
	prov, ok := f.providerOf(m)
	if !ok || m.FleetState != from {
		return fmt.Errorf("machine %s is %s, not %s", m.ID, m.FleetState, from)
	}
	callCtx, cancel := context.WithTimeout(ctx, f.cfg.ProviderTimeout)
	inst, err := call(callCtx, prov, m)
	cancel()
	if err != nil {
		return fmt.Errorf("%s %s: %w", strings.ToLower(eventReason), m.ID, err)
	}
	return f.store.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.GetMachine(machineID)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		if err := SetFleetState(cur, to, now); err != nil {
			return err
		}
		cur.Reason, cur.Addresses = "", nil
		if inst != nil {
			cur.Addresses, cur.LastHeartbeat = inst.Addresses, &now
		}
		if err := tx.PutMachine(cur); err != nil {
			return err
		}
		return store.Record(tx, api.EventNormal, eventReason, "Machine", cur.ID, "%s (addresses %v)", reason, cur.Addresses)
	})
}
