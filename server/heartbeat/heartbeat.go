// Package heartbeat is the ingestion of machines' heartbeats: a
// heartbeat that changes nothing but the time is answered from the
// server's view of the store (or a read) and batched for one write per
// interval; one that changes something is written at once, through the
// fleet's and the replicas' state machines. Each answer is what the
// machine must run.
package heartbeat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/replica/ingest"
	"github.com/gantry-dev/gantry/server/respond"
	"github.com/gantry-dev/gantry/server/secretread"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/view"
)

// Ingester takes heartbeats.
type Ingester struct {
	// Store is written when a heartbeat changes something.
	Store store.Store
	// Follower keeps the view quiet heartbeats are answered from.
	Follower *view.Follower
	// Secrets opens the Secrets of a transaction.
	Secrets func(tx store.Tx) *secretread.Reader
	// Sink records replica states.
	Sink ingest.Sink
	// InstanceType is a machine's instance type in its provider's
	// catalog (nil when unknown).
	InstanceType func(tx store.Tx, m *api.Machine) (*provisioner.InstanceType, error)
	// MemberRole is what a failover member must do, for its assignment.
	MemberRole func(tx store.Tx, r *api.Replica, member *api.FailoverMemberSpec) (*api.FailoverAssignment, error)
	Log        *slog.Logger
}

// Heartbeat records machine id's heartbeat at now and returns its
// assignments, and how the heartbeat was taken (the path the heartbeats
// metric counts): "view" or "quiet" when it changed nothing but the time
// (answered from the view, or from a store read), "changed" when it was
// written.
func (in *Ingester) Heartbeat(ctx context.Context, id string, req api.HeartbeatRequest, now time.Time) ([]api.Assignment, string, error) {
	assignments, path, err := in.quiet(ctx, id, req, now)
	if err == nil && path == "" {
		path = "changed"
		assignments, err = in.write(ctx, id, req, now)
	}
	return assignments, path, err
}

// Reads are the reads a machine's assignments need: a store
// transaction's, or the server's view's.
type Reads interface {
	GetMemory(key string) (string, error)
	GetService(name string) (*api.Service, error)
}

// ErrNeedsStore: the view cannot answer (a Secret to open, a failover
// role to read); the store does.
var ErrNeedsStore = errors.New("needs a store read")

// quiet reads what the heartbeat would change; when nothing but
// the time, it returns the machine's assignments and how it read them
// (the path the heartbeats metric counts): "view", the server's view of
// the store, or "quiet", a store read. Otherwise the path is "".
func (in *Ingester) quiet(ctx context.Context, id string, req api.HeartbeatRequest, now time.Time) ([]api.Assignment, string, error) {
	if req.Inventory != nil {
		return nil, "", nil
	}
	if assignments, quiet, ok := in.quietFromView(ctx, id, req, now); ok {
		return assignments, pathIf(quiet, "view"), nil
	}
	assignments, quiet, err := in.quietFromStore(ctx, id, req, now)
	return assignments, pathIf(quiet, "quiet"), err
}

func pathIf(quiet bool, path string) string {
	if quiet {
		return path
	}
	return ""
}

// quietFromStore is quiet's store read.
func (in *Ingester) quietFromStore(ctx context.Context, id string, req api.HeartbeatRequest, now time.Time) ([]api.Assignment, bool, error) {
	var assignments []api.Assignment
	quiet := false
	err := in.Store.View(ctx, func(tx store.Tx) error {
		m, replicas, leaving, err := tx.MachineWork(id)
		if err != nil {
			return err
		}
		if !m.Live() {
			return respond.Errorf(http.StatusGone, "gone", "", "machine %s is terminated", id)
		}
		if m.UnreachableSince != nil {
			return nil
		}
		if stale(m, req) {
			// Newer news of this machine were applied: answer, change nothing.
			quiet = true
			assignments, err = in.Assignments(tx, in.Secrets(tx), m, append(replicas, leaving...))
			return err
		}
		changed, err := replica.Apply(replicas, reportOf(m, req), now)
		if err != nil || len(changed) > 0 {
			return err
		}
		state := m.FleetState
		fleet.UpdateActivity(m, len(replicas)+len(leaving), now)
		if m.FleetState != state {
			return nil
		}
		quiet = true
		if m.FleetState == api.FleetTerminating {
			return nil
		}
		assignments, err = in.Assignments(tx, in.Secrets(tx), m, append(replicas, leaving...))
		return err
	})
	return assignments, quiet, err
}

// stale: a newer heartbeat of the machine was applied already.
func stale(m *api.Machine, req api.HeartbeatRequest) bool {
	return req.Sequence != 0 && req.Sequence <= m.ReportSequence
}

func reportOf(m *api.Machine, req api.HeartbeatRequest) replica.Report {
	// On an overlay each replica keeps the address its placement gave it
	// from the machine's /24 (Subnet); elsewhere it is reached at the
	// machine's.
	report := replica.Report{Holder: m.ID, Statuses: req.Replicas, Subnet: m.Subnet}
	if len(m.Addresses) > 0 {
		report.Address = m.Addresses[0]
	}
	return report
}

// write records a heartbeat that changes something, in one
// transaction.
func (in *Ingester) write(ctx context.Context, id string, req api.HeartbeatRequest, now time.Time) ([]api.Assignment, error) {
	var assignments []api.Assignment
	err := in.Store.Update(ctx, func(tx store.Tx) error {
		assignments = nil
		m, err := tx.GetMachine(id)
		if err != nil {
			return err
		}
		if !m.Live() {
			return respond.Errorf(http.StatusGone, "gone", "", "machine %s is terminated", id)
		}
		if stale(m, req) {
			replicas, err := tx.ListReplicas(store.ReplicaFilter{Machine: id})
			if err != nil {
				return err
			}
			assignments, err = in.Assignments(tx, in.Secrets(tx), m, replicas)
			return err
		}
		if req.Sequence > m.ReportSequence {
			m.ReportSequence = req.Sequence
		}
		if fleet.Heartbeat(m, now) {
			if err := store.Record(tx, now, api.EventNormal, "Reachable", "Machine", id, "heartbeats again; its replicas stay"); err != nil {
				return err
			}
		}
		if req.Inventory != nil {
			inv, err := in.CheckInventory(tx, m, *req.Inventory, now)
			if err != nil {
				return err
			}
			fleet.ApplyInventory(m, inv)
		}
		replicas, err := tx.ListReplicas(store.ReplicaFilter{Machine: id})
		if err != nil {
			return err
		}
		if err := in.Sink.Record(tx, replicas, reportOf(m, req), now); err != nil {
			return err
		}
		leaving, err := tx.ListReplicas(store.ReplicaFilter{PreviousMachine: id})
		if err != nil {
			return err
		}
		fleet.UpdateActivity(m, len(replicas)+len(leaving), now)
		if err := tx.PutMachine(m); err != nil {
			return err
		}
		if m.FleetState == api.FleetTerminating {
			return nil // it runs nothing more: anything it still runs has moved
		}
		assignments, err = in.Assignments(tx, in.Secrets(tx), m, append(replicas, leaving...))
		return err
	})
	return assignments, err
}

// quietFromView answers a heartbeat from the server's view, with no
// store read, when it changes nothing but the time (as quiet does
// from the store). The view is first brought up to every commit
// this server has heard of. ok is false when the view cannot answer:
// the machine is not in it (terminated, or the view not loaded), or an
// assignment needs a Secret or a failover role.
func (in *Ingester) quietFromView(ctx context.Context, id string, req api.HeartbeatRequest, now time.Time) (assignments []api.Assignment, quiet, ok bool) {
	if !in.Follower.Current(ctx) {
		return nil, false, false
	}
	w, found := in.Follower.View().Work(id)
	if !found {
		return nil, false, false
	}
	m := *w.Machine // the view's objects are shared: change copies
	if m.UnreachableSince != nil {
		return nil, false, true
	}
	work := make([]*api.Replica, 0, len(w.On)+len(w.Leaving))
	for _, r := range append(w.On, w.Leaving...) {
		c := *r
		work = append(work, &c)
	}
	if !stale(&m, req) {
		changed, err := replica.Apply(work[:len(w.On)], reportOf(&m, req), now)
		if err != nil || len(changed) > 0 {
			return nil, false, true
		}
		state := m.FleetState
		fleet.UpdateActivity(&m, len(work), now)
		if m.FleetState != state {
			return nil, false, true
		}
		if m.FleetState == api.FleetTerminating {
			return nil, true, true
		}
	}
	assignments, err := in.Assignments(in.Follower.View(), nil, &m, work)
	if err != nil {
		return nil, false, false
	}
	return assignments, true, true
}

// Assignments is what machine m must run: each replica with its spec, and
// the GPUs and runtime class its placement gave it there.
// The reads come from a store transaction, or from the server's view
// (secrets nil), which cannot answer for a replica that needs a Secret
// or a failover role: ErrNeedsStore then.
func (in *Ingester) Assignments(reads Reads, secrets *secretread.Reader, m *api.Machine, replicas []*api.Replica) ([]api.Assignment, error) {
	var out []api.Assignment
	specs := map[string]*api.ServiceSpec{}
	for _, r := range replicas {
		key := decide.RevisionKey(r.Service, r.SpecHash)
		sp, ok := specs[key]
		if !ok {
			var err error
			if sp, err = RevisionSpec(reads, r); err != nil {
				return nil, err
			}
			specs[key] = sp
		}
		if sp == nil {
			continue
		}
		tx, inTx := reads.(store.Tx)
		if !inTx && (len(spec.SecretNames(*sp)) > 0 || sp.Failover != nil) {
			return nil, ErrNeedsStore
		}
		var secretEnv map[string]string
		var err error
		if secrets != nil {
			_, secretEnv, err = secrets.ServiceSecrets(*sp)
		}
		if secretread.IsMissing(err) {
			// Apply and the Secret calls keep every reference whole; a
			// replica whose Secret is gone all the same is left out.
			in.Log.Warn("replica left out of its machine's assignments", "replica", r.ID, "machine", m.ID, "err", err)
			continue
		}
		if err != nil {
			return nil, err // the store's: the transaction fails (and runs again if it lost a race)
		}
		as := api.Assignment{ReplicaID: r.ID, Incarnation: r.Incarnation, Service: r.Service, SpecHash: r.SpecHash, Spec: *sp, SecretEnv: secretEnv, Requests: r.Requests}
		addr := r.Address
		if r.Machine != m.ID {
			addr = r.PreviousAddress // the old copy of a moving replica
		}
		if inSubnet(m.Subnet, addr) { // overlay and routed: an address of its own
			as.Address = addr
		}
		if sp.Failover != nil && r.Machine == m.ID {
			if as.Failover, err = in.MemberRole(tx, r, sp.Failover); err != nil {
				return nil, err
			}
		}
		if r.Machine == m.ID {
			as.GPUs, as.RuntimeClass = devicesOf(m, r.GPUIndexes), r.RuntimeClass
		}
		out = append(out, as)
	}
	return out, nil
}

// RevisionSpec is what a replica runs: its revision's spec; for a
// replica made before revisions were kept, its service's current spec
// (its deployment replaces it); nil when its service is gone.
func RevisionSpec(tx Reads, r *api.Replica) (*api.ServiceSpec, error) {
	raw, err := tx.GetMemory(decide.RevisionPrefix(r.Service) + r.SpecHash)
	if errors.Is(err, store.ErrNotFound) {
		svc, err := tx.GetService(r.Service)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return &svc.Spec, nil
	}
	if err != nil {
		return nil, err
	}
	var rev api.Revision
	if err := json.Unmarshal([]byte(raw), &rev); err != nil {
		return nil, fmt.Errorf("revision %s of service %s: %w", r.SpecHash, r.Service, err)
	}
	return &rev.Spec, nil
}

func devicesOf(m *api.Machine, indexes []int) []api.GPUDevice {
	var out []api.GPUDevice
	for _, i := range indexes {
		for _, g := range m.GPUs {
			if g.Index == i {
				out = append(out, g)
			}
		}
	}
	return out
}

// Interval is the base interval, shortened for a machine that
// runs a failover member to perLease heartbeats per lease.
func Interval(base time.Duration, perLease int, assignments []api.Assignment) time.Duration {
	for _, as := range assignments {
		if f := as.Failover; f != nil && f.LeaseSeconds > 0 && perLease > 0 {
			base = min(base, time.Duration(f.LeaseSeconds)*time.Second/time.Duration(perLease))
		}
	}
	return base
}

// inSubnet: addr lies in the machine's /24 (the replica's own address, in
// overlay and routed modes).
func inSubnet(subnet, addr string) bool {
	p, err := netip.ParsePrefix(subnet)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(addr)
	return err == nil && p.Contains(a)
}
