package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/provider/external"
	gantryserver "github.com/gantry-dev/gantry/server"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/store"
)

// BenchmarkNamesChangeReachesAgents: a fleet of machines × 2 serving
// replicas of ten services; 1,000 agents wait in the names poll; one
// replica crashes. An op is the time from that write to the last waiting
// agent holding the new names (p50 and p99 over the ops reported too):
//
//	go test -run '^$' -bench NamesChangeReachesAgents -benchtime 20x -count 3 ./e2e
func BenchmarkNamesChangeReachesAgents(b *testing.B) {
	for _, machines := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("machines=%d", machines), func(b *testing.B) {
			url, token, st := inProcessServer(b)
			fillServingFleet(b, st, machines, 2)
			agents := min(machines, 1000)
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: agents, MaxConnsPerHost: agents}}
			c := client.New(url, token, hc)
			first, err := c.MachineNames(context.Background(), "m-0000", "")
			if err != nil || len(first.Records) != 10 {
				b.Fatalf("names: %v (%d records)", err, len(first.Records))
			}
			version := first.Version
			var took []time.Duration
			state := api.ReplicaCrashed
			for b.Loop() {
				var wg sync.WaitGroup
				var mu sync.Mutex
				var last time.Time
				ready := make(chan struct{}, agents) // every agent's goroutine started
				for i := range agents {
					wg.Add(1)
					go func() {
						defer wg.Done()
						ready <- struct{}{}
						got, err := pollVersion(hc, url, token, fmt.Sprintf("m-%04d", i), version)
						mu.Lock()
						defer mu.Unlock()
						if err != nil || got == version {
							b.Errorf("agent %d: %v, version unchanged", i, err)
							return
						}
						if now := time.Now(); now.After(last) {
							last = now
						}
					}()
				}
				for range agents {
					<-ready
				}
				// A poll that reaches the server after the write is answered at
				// once: either way the op ends when every agent holds the change.
				start := time.Now()
				setReplicaState(b, st, "svc0-0", state)
				wg.Wait()
				took = append(took, last.Sub(start))
				next, err := c.MachineNames(context.Background(), "m-0000", "")
				if err != nil {
					b.Fatal(err)
				}
				version = next.Version
				state = map[api.ReplicaState]api.ReplicaState{api.ReplicaCrashed: api.ReplicaRunning, api.ReplicaRunning: api.ReplicaCrashed}[state]
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms")
			b.ReportMetric(float64(took[len(took)*99/100].Milliseconds()), "p99-ms")
		})
	}
}

// pollVersion is one agent's names poll, reading the answer's version
// and its whole body without decoding it: each agent decodes on its own
// machine, not in this process.
func pollVersion(hc *http.Client, url, token, machine, version string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url+"/v1/machines/"+machine+"/names?delta=true&version="+version, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return resp.Header.Get(gantryserver.NamesVersionHeader), nil
}

// fillServingFleet writes joined machines to cluster dev, each running
// perMachine serving replicas of one of ten services (which it writes too).
func fillServingFleet(t testing.TB, st store.Store, machines, perMachine int) {
	t.Helper()
	now := time.Now()
	err := st.Update(context.Background(), func(tx store.Tx) error {
		// Replicas of the services' current revision, as many as they
		// declare, on machines joined by hand: the control loop has
		// nothing to change.
		hashes := map[string]string{}
		for s := range 10 {
			n := machines * perMachine / 10
			svc := &api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: fmt.Sprintf("svc%d", s)},
				Spec: api.ServiceSpec{Cluster: "dev", Command: []string{"x"}, Ports: []api.Port{{Name: "http"}}, Replicas: &n}}
			hashes[svc.Metadata.Name] = spec.RevisionHash(svc.Spec, nil)
			if err := tx.PutService(svc); err != nil {
				return err
			}
		}
		for i := range machines {
			m := &api.Machine{ID: fmt.Sprintf("m-%04d", i), Cluster: "dev", Group: "general", InstanceType: "local.small", Zone: "local-a",
				CapacityType: "onDemand", Provider: external.Name, ProviderKey: external.Name, LaunchKey: api.ManualLaunchKey, JoinState: api.JoinJoined, FleetState: api.FleetActive,
				Addresses: []string{fmt.Sprintf("10.%d.%d.1", i/250, i%250)}, Capacity: api.Resources{MilliCPU: 16000, MemoryBytes: 64 << 30},
				PricePerHour: 0.5, CreatedAt: now, JoinedAt: &now, LastHeartbeat: &now, StateChangedAt: now}
			if err := tx.CreateMachine(m); err != nil {
				return err
			}
			for j := range perMachine {
				n := i*perMachine + j
				r := &api.Replica{ID: fmt.Sprintf("svc%d-%d", n%10, n/10), Service: fmt.Sprintf("svc%d", n%10), Cluster: "dev", Index: n / 10,
					Machine: m.ID, State: api.ReplicaRunning, Health: api.HealthHealthy, SpecHash: hashes[fmt.Sprintf("svc%d", n%10)], Address: m.Addresses[0],
					HostPorts: map[string]int{"http": 20000 + j}, Requests: api.Resources{MilliCPU: 500, MemoryBytes: 1 << 30}, UpdatedAt: now}
				if err := tx.PutReplica(r); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func setReplicaState(t testing.TB, st store.Store, id string, state api.ReplicaState) {
	t.Helper()
	err := st.Update(context.Background(), func(tx store.Tx) error {
		r, err := tx.GetReplica(id)
		if err != nil {
			return err
		}
		r.State = state
		return tx.PutReplica(r)
	})
	if err != nil {
		t.Fatal(err)
	}
}
