package storetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/store"
)

// A live machine's /24 is unique in its cluster; a terminated machine
// gives it back, and another cluster may use it.
func testUniqueLiveSubnet(t *testing.T, s store.Store) {
	ctx := context.Background()
	create := func(id, cluster string, state api.FleetState) error {
		return s.Update(ctx, func(tx store.Tx) error {
			return tx.CreateMachine(&api.Machine{ID: id, Cluster: cluster, LaunchKey: "lk-" + id, Subnet: "10.1.0.0/24", FleetState: state})
		})
	}
	must(t, create("m1", "a", api.FleetReady))
	if err := create("m2", "a", api.FleetReady); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second live machine on 10.1.0.0/24: %v, want ErrExists", err)
	}
	must(t, create("m3", "b", api.FleetReady))
	must(t, s.Update(ctx, func(tx store.Tx) error {
		m, err := tx.GetMachine("m1")
		if err != nil {
			return err
		}
		m.FleetState = api.FleetTerminated
		return tx.PutMachine(m)
	}))
	must(t, create("m4", "a", api.FleetReady))
}

// One machine per launch key; machines joined by hand share theirs.
func testUniqueLaunchKey(t *testing.T, s store.Store) {
	ctx := context.Background()
	create := func(id, key string) error {
		return s.Update(ctx, func(tx store.Tx) error {
			return tx.CreateMachine(&api.Machine{ID: id, Cluster: "a", LaunchKey: key, FleetState: api.FleetReady})
		})
	}
	must(t, create("m1", "lk-1"))
	if err := create("m2", "lk-1"); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second machine with launch key lk-1: %v, want ErrExists", err)
	}
	must(t, create("h1", api.ManualLaunchKey))
	must(t, create("h2", api.ManualLaunchKey))
}

// Writers racing on the same rows all land, each exactly once: the store
// serializes them (or retries the losers), never loses an update.
func testConcurrentWriters(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutMeta("counter", "0") }))
	const writers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				errs <- s.Update(ctx, func(tx store.Tx) error {
					v, err := tx.GetMeta("counter")
					if err != nil {
						return err
					}
					n, _ := strconv.Atoi(v)
					if err := tx.PutMemory(fmt.Sprintf("w%d/%d", w, i), "x"); err != nil {
						return err
					}
					return tx.PutMeta("counter", strconv.Itoa(n+1))
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	must(t, s.View(ctx, func(tx store.Tx) error {
		v, err := tx.GetMeta("counter")
		if v != strconv.Itoa(writers*each) {
			t.Errorf("counter after %d increments: %s", writers*each, v)
		}
		mem, _ := tx.ListMemory()
		if len(mem) != writers*each {
			t.Errorf("%d memory entries, want %d", len(mem), writers*each)
		}
		return err
	}))
}

// Two servers recording a launch intent for the same free /24 at once:
// exactly one machine gets it, the other write fails as a conflict.
func testConcurrentSubnetClaims(t *testing.T, s store.Store) {
	ctx := context.Background()
	const racers = 6
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		wg.Go(func() {
			errs[i] = s.Update(ctx, func(tx store.Tx) error {
				live, err := tx.ListMachines(store.MachineFilter{Cluster: "a", LiveOnly: true})
				if err != nil {
					return err
				}
				if len(live) > 0 {
					return fmt.Errorf("%w: the /24 is taken", store.ErrExists)
				}
				id := fmt.Sprintf("m%d", i)
				return tx.CreateMachine(&api.Machine{ID: id, Cluster: "a", LaunchKey: "lk-" + id, Subnet: "10.9.0.0/24", FleetState: api.FleetReady})
			})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrExists):
			t.Errorf("a losing claim failed otherwise than as a conflict: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d claims of 10.9.0.0/24 succeeded, want exactly 1", won)
	}
}

// Heartbeats flushed into liveness show in the machine's reads; an older
// flush (from a server that lagged) never hides a newer heartbeat.
func testLiveness(t *testing.T, s store.Store) {
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	own := base.Add(time.Second)
	must(t, s.Update(ctx, func(tx store.Tx) error {
		return tx.CreateMachine(&api.Machine{ID: "m1", Cluster: "a", LaunchKey: "lk-1", FleetState: api.FleetReady, LastHeartbeat: &own})
	}))
	check := func(want time.Time) {
		t.Helper()
		must(t, s.View(ctx, func(tx store.Tx) error {
			m, err := tx.GetMachine("m1")
			if err != nil {
				return err
			}
			list, err := tx.ListMachines(store.MachineFilter{Cluster: "a"})
			if err != nil {
				return err
			}
			if m.LastHeartbeat == nil || !m.LastHeartbeat.Equal(want) || len(list) != 1 || !list[0].LastHeartbeat.Equal(want) {
				t.Errorf("last heartbeat %v (list %v), want %v", m.LastHeartbeat, list[0].LastHeartbeat, want)
			}
			return nil
		}))
	}
	check(own)
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutLiveness(map[string]time.Time{"m1": base}) }))
	check(own) // the machine's own record is newer
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutLiveness(map[string]time.Time{"m1": base.Add(time.Minute)}) }))
	check(base.Add(time.Minute))
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutLiveness(map[string]time.Time{"m1": base.Add(30 * time.Second)}) }))
	check(base.Add(time.Minute))

	// A batch larger than one statement records every machine.
	batch := map[string]time.Time{}
	for i := range 301 {
		batch[fmt.Sprintf("b%03d", i)] = base.Add(time.Duration(i) * time.Second)
	}
	must(t, s.Update(ctx, func(tx store.Tx) error {
		for id := range batch {
			if err := tx.PutMachine(&api.Machine{ID: id, Cluster: "b"}); err != nil {
				return err
			}
		}
		return tx.PutLiveness(batch)
	}))
	must(t, s.View(ctx, func(tx store.Tx) error {
		list, err := tx.ListMachines(store.MachineFilter{Cluster: "b"})
		if len(list) != len(batch) {
			t.Fatalf("%d machines, want %d (%v)", len(list), len(batch), err)
		}
		for _, m := range list {
			if m.LastHeartbeat == nil || !m.LastHeartbeat.Equal(batch[m.ID]) {
				t.Errorf("%s: last heartbeat %v, want %v", m.ID, m.LastHeartbeat, batch[m.ID])
			}
		}
		return err
	}))
}
