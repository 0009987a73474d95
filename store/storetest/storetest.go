// Package storetest is the behaviour every Store implementation must have;
// each implementation runs Run from its own tests.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
)

// Run exercises a fresh, empty store made by open.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Run("ResourcesRoundTrip", func(t *testing.T) { testResources(t, open(t)) })
	t.Run("RollbackOnError", func(t *testing.T) { testRollback(t, open(t)) })
	t.Run("MachineAndReplicaFilters", func(t *testing.T) { testFilters(t, open(t)) })
	t.Run("Events", func(t *testing.T) { testEvents(t, open(t)) })
	t.Run("CredentialsAndMeta", func(t *testing.T) { testCredentials(t, open(t)) })
	t.Run("CreateMachineNeverOverwrites", func(t *testing.T) { testCreateMachine(t, open(t)) })
	t.Run("Memory", func(t *testing.T) { testMemory(t, open(t)) })
	t.Run("ReadsDoNotWaitForTheWriter", func(t *testing.T) { testReadsDuringWrite(t, open(t)) })
	t.Run("UniqueLiveSubnet", func(t *testing.T) { testUniqueLiveSubnet(t, open(t)) })
	t.Run("UniqueLaunchKey", func(t *testing.T) { testUniqueLaunchKey(t, open(t)) })
	t.Run("ConcurrentWriters", func(t *testing.T) { testConcurrentWriters(t, open(t)) })
	t.Run("ConcurrentSubnetClaims", func(t *testing.T) { testConcurrentSubnetClaims(t, open(t)) })
	t.Run("Liveness", func(t *testing.T) { testLiveness(t, open(t)) })
	t.Run("LivenessMarks", func(t *testing.T) { testLivenessMarks(t, open(t)) })
	t.Run("LivenessMarksFollowCommits", func(t *testing.T) { testLivenessMarksFollowCommits(t, open(t)) })
	t.Run("Secrets", func(t *testing.T) { testSecrets(t, open(t)) })
	t.Run("MachineWork", func(t *testing.T) { testMachineWork(t, open(t)) })
	t.Run("FailoverGroups", func(t *testing.T) { testFailoverGroups(t, open(t)) })
}

// A machine id is taken once: a second create fails with ErrExists and
// leaves the first record as it was.
func testCreateMachine(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.Update(ctx, func(tx store.Tx) error {
		return tx.CreateMachine(&api.Machine{ID: "m1", Cluster: "a", InstanceType: "first", FleetState: api.FleetReady})
	}))
	err := s.Update(ctx, func(tx store.Tx) error {
		return tx.CreateMachine(&api.Machine{ID: "m1", Cluster: "a", InstanceType: "second", FleetState: api.FleetReady})
	})
	if !errors.Is(err, store.ErrExists) {
		t.Fatalf("second create of m1: %v, want ErrExists", err)
	}
	if errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a conflict is not a store failure: %v", err)
	}
	must(t, s.View(ctx, func(tx store.Tx) error {
		m, err := tx.GetMachine("m1")
		if err == nil && m.InstanceType != "first" {
			t.Errorf("the first record was overwritten: %+v", m)
		}
		return err
	}))
}

func testMemory(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.Update(ctx, func(tx store.Tx) error {
		for k, v := range map[string]string{"desired/a/g": "3", "idle/m1": "2026-01-01T00:00:00Z", "gone": "x"} {
			if err := tx.PutMemory(k, v); err != nil {
				return err
			}
		}
		return nil
	}))
	must(t, s.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutMemory("desired/a/g", "4"); err != nil {
			return err
		}
		return tx.DeleteMemory("gone")
	}))
	must(t, s.View(ctx, func(tx store.Tx) error {
		mem, err := tx.ListMemory()
		if len(mem) != 2 || mem["desired/a/g"] != "4" || mem["idle/m1"] == "" {
			t.Errorf("memory: %v", mem)
		}
		if err != nil {
			return err
		}
		desired, err := tx.ListMemoryPrefix("desired/")
		if len(desired) != 1 || desired["desired/a/g"] != "4" {
			t.Errorf("memory with prefix desired/: %v", desired)
		}
		if err != nil {
			return err
		}
		if v, err := tx.GetMemory("idle/m1"); err != nil || v != "2026-01-01T00:00:00Z" {
			t.Errorf("get idle/m1: %q %v", v, err)
		}
		if _, err := tx.GetMemory("gone"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("get of a deleted entry: %v", err)
		}
		return nil
	}))
}

// A read transaction completes while a write transaction is open.
func testReadsDuringWrite(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutMeta("k", "before") }))
	inWrite, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.Update(ctx, func(tx store.Tx) error {
			if err := tx.PutMeta("k", "after"); err != nil {
				return err
			}
			close(inWrite)
			<-release
			return nil
		})
	}()
	<-inWrite
	readCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := s.View(readCtx, func(tx store.Tx) error {
		v, err := tx.GetMeta("k")
		if err == nil && v != "before" {
			t.Errorf("a read saw an uncommitted write: %q", v)
		}
		return err
	})
	close(release)
	if err != nil {
		t.Fatalf("read during a write: %v", err)
	}
	must(t, <-done)
}

func testResources(t *testing.T, s store.Store) {
	ctx := context.Background()
	c := &api.Cluster{Kind: api.KindCluster, Metadata: api.ObjectMeta{Name: "dev", Generation: 1},
		Spec: api.ClusterSpec{CapacityGroups: []api.CapacityGroup{{GroupID: "g", MaxSize: 2}}}}
	svc := &api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "web"}, Spec: api.ServiceSpec{Cluster: "dev", Image: "nginx"}}
	must(t, s.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutCluster(c); err != nil {
			return err
		}
		return tx.PutService(svc)
	}))
	must(t, s.View(ctx, func(tx store.Tx) error {
		got, err := tx.GetCluster("dev")
		if err != nil {
			return err
		}
		if got.Spec.CapacityGroups[0].MaxSize != 2 || got.Metadata.Generation != 1 {
			t.Errorf("cluster round trip: %+v", got)
		}
		list, err := tx.ListServices()
		if err != nil {
			return err
		}
		if len(list) != 1 || list[0].Spec.Image != "nginx" {
			t.Errorf("services: %+v", list)
		}
		if _, err := tx.GetService("missing"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("missing service: got %v, want ErrNotFound", err)
		}
		return nil
	}))
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.DeleteService("web") }))
	must(t, s.View(ctx, func(tx store.Tx) error {
		if _, err := tx.GetService("web"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deleted service still readable: %v", err)
		}
		return nil
	}))
}

func testFailoverGroups(t *testing.T, s store.Store) {
	ctx := context.Background()
	g := &api.FailoverGroup{Kind: api.KindFailoverGroup, Metadata: api.ObjectMeta{Name: "pg", Generation: 1}, Spec: api.FailoverGroupSpec{
		Primary: api.FailoverSide{Cluster: "east"}, Replica: api.FailoverSide{Cluster: "west"}, LeaseSeconds: 10,
		Capability: api.FailoverCapability{Name: api.CapabilityPostgres, Postgres: &api.PostgresCapability{Synchronous: true}}}}
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutFailoverGroup(g) }))
	g.Metadata.Generation = 2
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutFailoverGroup(g) }))
	must(t, s.View(ctx, func(tx store.Tx) error {
		got, err := tx.GetFailoverGroup("pg")
		if err != nil {
			return err
		}
		if got.Metadata.Generation != 2 || got.Spec.Replica.Cluster != "west" || !got.Spec.Capability.Postgres.Synchronous {
			t.Errorf("failover group round trip: %+v", got)
		}
		list, err := tx.ListFailoverGroups()
		if err != nil || len(list) != 1 {
			t.Errorf("list: %v %v", list, err)
		}
		return nil
	}))
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.DeleteFailoverGroup("pg") }))
	must(t, s.View(ctx, func(tx store.Tx) error {
		if _, err := tx.GetFailoverGroup("pg"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deleted group: got %v, want ErrNotFound", err)
		}
		return nil
	}))
}

func testRollback(t *testing.T, s store.Store) {
	ctx := context.Background()
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutCluster(&api.Cluster{Kind: api.KindCluster, Metadata: api.ObjectMeta{Name: "x"}}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update returned %v, want the callback's error", err)
	}
	must(t, s.View(ctx, func(tx store.Tx) error {
		if _, err := tx.GetCluster("x"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("write of a failed transaction is visible: %v", err)
		}
		return nil
	}))
}

func testFilters(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Now().UTC()
	must(t, s.Update(ctx, func(tx store.Tx) error {
		for _, m := range []*api.Machine{
			{ID: "m1", Cluster: "a", FleetState: api.FleetActive, CreatedAt: now},
			{ID: "m2", Cluster: "a", FleetState: api.FleetTerminated, CreatedAt: now},
			{ID: "m3", Cluster: "b", FleetState: api.FleetReady, CreatedAt: now},
		} {
			if err := tx.PutMachine(m); err != nil {
				return err
			}
		}
		for _, r := range []*api.Replica{
			{ID: "web-0", Service: "web", Cluster: "a", Machine: "m1"},
			{ID: "web-1", Service: "web", Cluster: "a"},
			{ID: "db-0", Service: "db", Cluster: "b", Machine: "m3", PreviousMachine: "m1"},
		} {
			if err := tx.PutReplica(r); err != nil {
				return err
			}
		}
		return nil
	}))
	must(t, s.View(ctx, func(tx store.Tx) error {
		live, _ := tx.ListMachines(store.MachineFilter{Cluster: "a", LiveOnly: true})
		if len(live) != 1 || live[0].ID != "m1" {
			t.Errorf("live machines of a: %v", ids(live))
		}
		all, _ := tx.ListMachines(store.MachineFilter{})
		if len(all) != 3 {
			t.Errorf("all machines: %d", len(all))
		}
		onM1, _ := tx.ListReplicas(store.ReplicaFilter{Machine: "m1"})
		if len(onM1) != 1 || onM1[0].ID != "web-0" {
			t.Errorf("replicas on m1: %+v", onM1)
		}
		web, _ := tx.ListReplicas(store.ReplicaFilter{Service: "web"})
		if len(web) != 2 {
			t.Errorf("replicas of web: %d", len(web))
		}
		moving, _ := tx.ListReplicas(store.ReplicaFilter{PreviousMachine: "m1"})
		if len(moving) != 1 || moving[0].ID != "db-0" {
			t.Errorf("replicas moving off m1: %+v", moving)
		}
		return nil
	}))
}

func testEvents(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.Update(ctx, func(tx store.Tx) error {
		for i := 0; i < 5; i++ {
			name := "web"
			if i%2 == 1 {
				name = "db"
			}
			if err := tx.AddEvent(&api.Event{Type: api.EventNormal, Reason: "R", ObjectKind: "Service", ObjectName: name, Message: string(rune('a' + i))}); err != nil {
				return err
			}
		}
		return nil
	}))
	must(t, s.View(ctx, func(tx store.Tx) error {
		web, _ := tx.ListEvents(store.EventFilter{ObjectKind: "Service", ObjectName: "web"})
		if len(web) != 3 || web[0].Message != "a" || web[2].Message != "e" {
			t.Errorf("web events (oldest first): %+v", web)
		}
		last2, _ := tx.ListEvents(store.EventFilter{Limit: 2})
		if len(last2) != 2 || last2[1].Message != "e" || last2[0].Message != "d" {
			t.Errorf("newest two: %+v", last2)
		}
		after, _ := tx.ListEvents(store.EventFilter{AfterID: last2[0].ID})
		if len(after) != 1 || after[0].Message != "e" {
			t.Errorf("after id: %+v", after)
		}
		return nil
	}))
}

func testCredentials(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutCredentialHash("m1", []byte{1, 2, 3}); err != nil {
			return err
		}
		return tx.PutMeta("k", "v")
	}))
	must(t, s.View(ctx, func(tx store.Tx) error {
		h, err := tx.GetCredentialHash("m1")
		if err != nil || len(h) != 3 {
			t.Errorf("credential: %v %v", h, err)
		}
		if v, err := tx.GetMeta("k"); err != nil || v != "v" {
			t.Errorf("meta: %q %v", v, err)
		}
		if _, err := tx.GetMeta("nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("missing meta: %v", err)
		}
		return nil
	}))
	must(t, s.Update(ctx, func(tx store.Tx) error {
		for k, v := range map[string]string{"trace/a": "1", "trace/b": "2", "tracer": "3"} {
			if err := tx.PutMeta(k, v); err != nil {
				return err
			}
		}
		return tx.DeleteMeta("trace/a")
	}))
	must(t, s.View(ctx, func(tx store.Tx) error {
		got, err := tx.ListMetaPrefix("trace/")
		if err != nil || len(got) != 1 || got["trace/b"] != "2" {
			t.Errorf("meta under trace/ after trace/a was deleted: %v %v", got, err)
		}
		return nil
	}))
}

// MachineWork reads what ListReplicas with Machine and PreviousMachine
// read, with the machine and its liveness.
func testMachineWork(t *testing.T, s store.Store) {
	ctx := context.Background()
	beat := time.Unix(1_800_000_000, 0).UTC()
	must(t, s.Update(ctx, func(tx store.Tx) error {
		for _, m := range []*api.Machine{{ID: "m1", Cluster: "c"}, {ID: "m2", Cluster: "c"}} {
			if err := tx.PutMachine(m); err != nil {
				return err
			}
		}
		for _, r := range []*api.Replica{
			{ID: "b-0", Service: "b", Machine: "m1"}, {ID: "a-1", Service: "a", Machine: "m1"}, {ID: "a-0", Service: "a", Machine: "m1"},
			{ID: "c-0", Service: "c", Machine: "m2", PreviousMachine: "m1"}, {ID: "d-0", Service: "d", Machine: "m2"},
		} {
			if err := tx.PutReplica(r); err != nil {
				return err
			}
		}
		return tx.PutLiveness(map[string]time.Time{"m1": beat})
	}))
	must(t, s.View(ctx, func(tx store.Tx) error {
		m, on, leaving, err := tx.MachineWork("m1")
		if err != nil {
			return err
		}
		if m.ID != "m1" || m.LastHeartbeat == nil || !m.LastHeartbeat.Equal(beat) {
			t.Errorf("machine %+v", m)
		}
		wantOn, _ := tx.ListReplicas(store.ReplicaFilter{Machine: "m1"})
		wantLeaving, _ := tx.ListReplicas(store.ReplicaFilter{PreviousMachine: "m1"})
		if fmt.Sprint(replicaIDs(on)) != fmt.Sprint(replicaIDs(wantOn)) || fmt.Sprint(replicaIDs(leaving)) != fmt.Sprint(replicaIDs(wantLeaving)) || len(on) != 3 || len(leaving) != 1 {
			t.Errorf("on %v leaving %v; ListReplicas says %v and %v", replicaIDs(on), replicaIDs(leaving), replicaIDs(wantOn), replicaIDs(wantLeaving))
		}
		if _, _, _, err := tx.MachineWork("nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("missing machine: %v", err)
		}
		return nil
	}))
}

func replicaIDs(rs []*api.Replica) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func testSecrets(t *testing.T, s store.Store) {
	ctx := context.Background()
	put := func(revision, sealed string) {
		sec := &api.Secret{Metadata: api.ObjectMeta{Name: "db"}, Status: &api.SecretInfo{Keys: []string{"password"}, Revision: revision}}
		must(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutSecret(sec, sealed) }))
	}
	put("r1", "sealed-1")
	put("r2", "sealed-2")
	must(t, s.View(ctx, func(tx store.Tx) error {
		sec, sealed, err := tx.GetSecret("db")
		if err != nil || sealed != "sealed-2" || sec.Status.Revision != "r2" {
			t.Errorf("secret: %+v %q %v", sec, sealed, err)
		}
		list, err := tx.ListSecrets()
		if err != nil || len(list) != 1 || list[0].Metadata.Name != "db" {
			t.Errorf("list: %v %v", list, err)
		}
		if _, _, err := tx.GetSecret("nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("missing secret: %v", err)
		}
		return nil
	}))
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.DeleteSecret("db") }))
	must(t, s.View(ctx, func(tx store.Tx) error {
		if _, _, err := tx.GetSecret("db"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deleted secret: %v", err)
		}
		return nil
	}))
}

func ids(ms []*api.Machine) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
