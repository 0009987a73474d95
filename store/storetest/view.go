package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/internal/chunks"
	"github.com/gantry-dev/gantry/replica"
	"github.com/gantry-dev/gantry/store"
	"github.com/gantry-dev/gantry/store/view"
)

// RunView checks a server's view of the store (package view) against the
// store itself: for seeded random sequences of writes (objects made,
// changed, moved out of the view and deleted; memory set, set to what it
// holds, deleted; heartbeats, which are not in the feed), the view synced in a read transaction holds exactly
// what that transaction lists; with a retention that compacts the feed
// at once, the view reads the store again and still agrees.
func RunView(t *testing.T, open func(t *testing.T, retention time.Duration) store.Store) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("FollowsTheStore/seed=%d", seed), func(t *testing.T) {
			loads := testViewFollows(t, open(t, time.Hour), seed, 4)
			if loads != 1 {
				t.Errorf("the view read the whole store %d times, want once (it follows the feed)", loads)
			}
		})
	}
	t.Run("ReloadsWhenCompacted", func(t *testing.T) {
		if loads := testViewFollows(t, open(t, time.Nanosecond), 9, 30); loads < 2 {
			t.Errorf("the view read the whole store %d times through a compacted feed, want it again after a compaction", loads)
		}
	})
}

// testViewFollows writes rounds of random changes, syncing the view and
// comparing after each round; it returns how many full reads the view
// made.
func testViewFollows(t *testing.T, s store.Store, seed uint64, batch int) int {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, seed))
	v := view.New(batch, 0)
	w := &randomWriter{rng: rng, beat: time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)}
	for round := range 40 {
		must(t, s.Update(ctx, func(tx store.Tx) error {
			var errs []error
			for range 1 + rng.IntN(12) {
				errs = append(errs, w.write(tx))
			}
			return errors.Join(errs...)
		}))
		if rng.IntN(3) == 0 && round != 39 {
			continue // several rounds between syncs, as between passes
		}
		must(t, s.View(ctx, func(tx store.Tx) error {
			got, err := v.Sync(tx)
			if err != nil {
				return err
			}
			want, err := listAll(tx)
			if err != nil {
				return err
			}
			got.Machines, got.Heartbeats = got.WithHeartbeats(), nil // as the store lists them
			if g, w := snapshotJSON(t, got), snapshotJSON(t, want); g != w {
				t.Fatalf("round %d: the view\n%s\nthe store\n%s", round, g, w)
			}
			if err := sameWork(t, tx, v, want.Machines); err != nil {
				return err
			}
			return sameClusters(t, tx, v)
		}))
	}
	return v.Loads()
}

// sameClusters checks the view's clusters against the store's lists of
// each cluster's replicas and live machines.
func sameClusters(t *testing.T, tx store.Tx, v *view.View) error {
	t.Helper()
	for _, cluster := range []string{"c0", "c1", "c2"} {
		replicas, err := tx.ListReplicas(store.ReplicaFilter{Cluster: cluster})
		if err != nil {
			return err
		}
		machines, err := tx.ListMachines(store.MachineFilter{Cluster: cluster, LiveOnly: true})
		if err != nil {
			return err
		}
		gotReplicas, gotMachines, _, ok := v.Cluster(cluster)
		if !ok {
			t.Fatal("the view is not loaded after a sync")
		}
		if g, s := fmt.Sprint(replicaIDs(gotReplicas), machineIDs(gotMachines)), fmt.Sprint(replicaIDs(replicas), machineIDs(machines)); g != s {
			t.Fatalf("cluster %s: the view's replicas and machines %s, the store's %s", cluster, g, s)
		}
	}
	return nil
}

func machineIDs(machines []*api.Machine) []string {
	out := make([]string, len(machines))
	for i, m := range machines {
		out[i] = m.ID
	}
	return out
}

// sameWork checks the view's point reads of each machine's work against
// the store's.
func sameWork(t *testing.T, tx store.Tx, v *view.View, machines []*api.Machine) error {
	t.Helper()
	for _, m := range machines {
		_, on, leaving, err := tx.MachineWork(m.ID)
		if err != nil {
			return err
		}
		w, ok := v.Work(m.ID)
		if !ok {
			t.Fatalf("the view has no work of live machine %s", m.ID)
		}
		// The store's MachineWork lists in no order; the view's by id.
		byID := func(a, b *api.Replica) int { return strings.Compare(a.ID, b.ID) }
		slices.SortFunc(on, byID)
		slices.SortFunc(leaving, byID)
		if g, s := fmt.Sprint(replicaIDs(w.On), replicaIDs(w.Leaving)), fmt.Sprint(replicaIDs(on), replicaIDs(leaving)); g != s {
			t.Fatalf("machine %s: the view's replicas on it and leaving it %s, the store's %s", m.ID, g, s)
		}
	}
	return nil
}

// listAll is what the view must hold: the store's lists in tx.
func listAll(tx store.Tx) (view.Snapshot, error) {
	var s view.Snapshot
	var errs [6]error
	s.Revision, _ = tx.Revision()
	s.Clusters, errs[0] = tx.ListClusters()
	s.Services, errs[1] = tx.ListServices()
	s.FailoverGroups, errs[2] = tx.ListFailoverGroups()
	s.Machines, errs[3] = tx.ListMachines(store.MachineFilter{LiveOnly: true})
	replicas, err := tx.ListReplicas(store.ReplicaFilter{})
	s.Replicas, errs[4] = chunks.Of(replicas), err
	s.Memory, errs[5] = tx.ListMemory()
	s.InStoreOrder = !slices.ContainsFunc(replicas, func(r *api.Replica) bool { return !replica.NamedInService(r) })
	s.Pending, s.Unplaced, s.Moving, s.Retiring = map[string]int{}, []string{}, []string{}, []string{}
	for _, r := range replicas {
		if r.RetiringSince != nil {
			s.Retiring = append(s.Retiring, r.ID)
		}
		if r.Machine == "" {
			s.Pending[r.Cluster]++
			s.Unplaced = append(s.Unplaced, r.ID)
		}
		if r.PreviousMachine != "" {
			s.Moving = append(s.Moving, r.ID)
		}
	}
	slices.Sort(s.Unplaced)
	slices.Sort(s.Moving)
	slices.Sort(s.Retiring)
	s.Orphaned = []string{}
	for _, r := range replicas {
		if !slices.ContainsFunc(s.Services, func(svc *api.Service) bool { return svc.Metadata.Name == r.Service }) && !slices.Contains(s.Orphaned, r.Service) {
			s.Orphaned = append(s.Orphaned, r.Service)
		}
	}
	slices.Sort(s.Orphaned)
	s.MachineStates = view.CountMachineStates(s.Machines)
	s.Draining = map[string][]string{}
	for _, m := range s.Machines {
		if m.FleetState == api.FleetDraining {
			s.Draining[m.ID] = []string{}
			for _, r := range replicas {
				if r.Machine == m.ID || r.PreviousMachine == m.ID {
					s.Draining[m.ID] = append(s.Draining[m.ID], r.ID)
				}
			}
			slices.Sort(s.Draining[m.ID])
		}
	}
	return s, errors.Join(errs[:]...)
}

func snapshotJSON(t *testing.T, s view.Snapshot) string {
	t.Helper()
	if s.Memory == nil {
		s.Memory = map[string]string{}
	}
	data, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// randomWriter makes one random write of a fed kind.
type randomWriter struct {
	rng      *rand.Rand
	machines int
	beat     time.Time
}

// replicaID is the id of a replica of service sN: now and then one that
// does not begin with its service's name (the view then no longer
// vouches for the replicas' order).
func (w *randomWriter) replicaID(n string) string {
	if w.rng.IntN(8) == 0 {
		return "odd" + n
	}
	return "s" + n + "-" + fmt.Sprint(w.rng.IntN(4))
}

func (w *randomWriter) write(tx store.Tx) error {
	n := fmt.Sprint(w.rng.IntN(6))
	switch w.rng.IntN(10) {
	case 0:
		return tx.PutCluster(&api.Cluster{Kind: api.KindCluster, Metadata: api.ObjectMeta{Name: "c" + n}, Spec: api.ClusterSpec{ContainerCIDR: "10." + n + ".0.0/16"}})
	case 1:
		return tx.PutService(&api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "s" + n}, Spec: api.ServiceSpec{Cluster: "c1", Replicas: new(w.rng.IntN(9))}})
	case 2:
		return tx.DeleteService("s" + n)
	case 3:
		return tx.PutFailoverGroup(&api.FailoverGroup{Kind: api.KindFailoverGroup, Metadata: api.ObjectMeta{Name: "g" + n}, Spec: api.FailoverGroupSpec{Primary: api.FailoverSide{Cluster: "c" + n}}})
	case 4:
		w.machines++
		return tx.CreateMachine(&api.Machine{ID: fmt.Sprintf("m%03d", w.machines), Cluster: fmt.Sprintf("c%d", w.rng.IntN(3)), FleetState: api.FleetReady})
	case 5:
		m, err := tx.GetMachine(fmt.Sprintf("m%03d", 1+w.rng.IntN(max(w.machines, 1))))
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		// Terminated leaves the view (it lists live machines only).
		m.FleetState = []api.FleetState{api.FleetReady, api.FleetDraining, api.FleetTerminated}[w.rng.IntN(3)]
		return tx.PutMachine(m)
	case 6:
		// A replica written again may move to another cluster: the
		// view's index by cluster must follow.
		r := &api.Replica{ID: w.replicaID(n), Service: "s" + n, Cluster: fmt.Sprintf("c%d", w.rng.IntN(3)),
			State: []api.ReplicaState{api.ReplicaPending, api.ReplicaRunning}[w.rng.IntN(2)]}
		if w.machines > 0 && r.State == api.ReplicaRunning {
			r.Machine = fmt.Sprintf("m%03d", 1+w.rng.IntN(w.machines))
			if w.rng.IntN(3) == 0 {
				r.PreviousMachine = fmt.Sprintf("m%03d", 1+w.rng.IntN(w.machines))
			}
			if w.rng.IntN(4) == 0 {
				r.RetiringSince = new(w.beat) // the view counts them
			}
		}
		return tx.PutReplica(r)
	case 7:
		return tx.DeleteReplica(w.replicaID(n))
	case 8:
		// A heartbeat: not in the feed, and in the view all the same.
		w.beat = w.beat.Add(time.Duration(1+w.rng.IntN(5)) * time.Second)
		return tx.PutLiveness(map[string]time.Time{fmt.Sprintf("m%03d", 1+w.rng.IntN(max(w.machines, 1))): w.beat})
	default:
		if w.rng.IntN(3) == 0 {
			return tx.DeleteMemory("k" + n)
		}
		return tx.PutMemory("k"+n, fmt.Sprint(w.rng.IntN(3)))
	}
}
