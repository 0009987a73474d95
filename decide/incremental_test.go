package decide_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/decidetest"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/replica"
)

// TestIncrementalPassDecidesWhatAFullPassWould drives seeded random
// sequences of changes through the harness: specs scaled and changed,
// replicas crashing, machines falling silent and coming back, agents
// joining and running what they are given, and the time moving by
// seconds to many minutes. Whenever the controller would skip a pass
// (its inputs unchanged but heartbeats, before its wake), the harness
// runs the full pass anyway and fails if it decides anything: the
// incremental pass decides exactly what the full one would. The test
// also checks that both sides were exercised: passes the controller
// would skip, and deadlines that woke a pass which then decided.
func TestIncrementalPassDecidesWhatAFullPassWould(t *testing.T) {
	skippable, woken, reused, rescheduled, patched, afterPlacing, touched, spliced, partly, fromRecords := 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			h := incrementalWorld(t, seed)
			skippable += h.Skippable
			woken += h.Woken
			reused += h.ReusedCapacity
			rescheduled += h.ReusedScheduling
			patched += h.PatchedViews
			afterPlacing += h.PatchedPlacingViews
			touched += h.TouchedBookings
			spliced += h.SplicedViews
			partly += h.PartlyWalkedViews
			fromRecords += h.LooksFromRecords()
		})
	}
	if skippable == 0 || woken == 0 || reused == 0 || rescheduled == 0 || patched == 0 || afterPlacing == 0 || touched == 0 || spliced == 0 || partly == 0 || fromRecords == 0 {
		t.Fatalf("the sequences exercised %d skippable passes, %d woken by a deadline, %d that reused the last pass's scheduling and plan, %d its scheduling alone (the plan's deadline come), %d that patched its view (%d of a pass that placed, %d booking only the machines a change touched, %d of other machines, spliced, %d walking only the entries whose idle times could change), and %d looks for machines to remove that read only the machines changed since the last: all must happen",
			skippable, woken, reused, rescheduled, patched, afterPlacing, touched, spliced, partly, fromRecords)
	}
	t.Logf("%d passes the controller would skip, each checked; %d woken by a deadline; %d reused the last pass's scheduling and plan, %d its scheduling alone, %d patched its view (%d of a pass that placed, %d booking only the machines a change touched, %d of other machines, spliced, %d walking only the entries whose idle times could change), %d looks read only the machines changed since the last, each checked",
		skippable, woken, reused, rescheduled, patched, afterPlacing, touched, spliced, partly, fromRecords)
}

func incrementalWorld(t *testing.T, seed uint64) *decidetest.Harness {
	rng := rand.New(rand.NewPCG(seed, 31))
	h := decidetest.New(t)
	h.KeepScratch = seed%3 == 0 // as a controller's, never cleared: its looks take the last look's records
	h.Config.Planner.EmptyMachineTTL = []time.Duration{30 * time.Second, 2 * time.Minute, 5 * time.Minute}[rng.IntN(3)]
	h.Config.Planner.MinLifetime = []time.Duration{time.Minute, 10 * time.Minute}[rng.IntN(2)]
	// A long resync leaves the other deadlines to wake the passes.
	h.Config.ResyncInterval = []time.Duration{5 * time.Minute, 6 * time.Hour}[rng.IntN(2)]
	h.Cluster("c", decidetest.Group("small", "small", 0, 6), decidetest.Group("large", "large", 1, 4))
	drain := 5
	h.Service("web", "c", 3, "300m", "128Mi", func(s *api.ServiceSpec) {
		s.Update.MinHealthySeconds, s.Update.DrainSeconds = 20, &drain
	})
	h.Service("api", "c", 2, "700m", "256Mi", func(s *api.ServiceSpec) {
		s.Update.ProgressDeadlineSeconds = 120
		s.SecretEnv = map[string]api.SecretKeyRef{"TOKEN": {Name: "api-token", Key: "token"}}
	})
	h.Snap.SecretRevisions = map[string]string{"api-token": "1"}
	silent := map[string]bool{}
	steps := []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute}
	for i := 0; i < 250; i++ {
		incrementalChange(h, rng, silent)
		if rng.IntN(3) == 0 {
			h.Join()
		}
		if rng.IntN(3) == 0 {
			h.Run()
		}
		for _, m := range h.Snap.Machines {
			if m.JoinState == api.JoinJoined && !silent[m.ID] && m.UnreachableSince == nil {
				fleet.Heartbeat(m, h.Now)
			}
		}
		if rng.IntN(10) == 0 { // the act failed: nothing written, the memory as it was
			before := h.Memory
			h.Decide()
			h.Memory = before
		} else {
			answer(h, h.Pass())
		}
		h.Step(steps[rng.IntN(len(steps))])
	}
	return h
}

// answer plays the provider's side of a plan's lookups, as its calls
// would return: a Describe finds the instance running, a List finds
// every instance the provider runs.
func answer(h *decidetest.Harness, plan decide.Plan) {
	for _, id := range plan.Describes {
		if m := h.MachineByID(id); m != nil {
			h.Snap.Instances[id] = decide.InstanceObservation{Found: true, State: provisioner.StateRunning, At: h.Now}
		}
	}
	for _, key := range plan.Lists {
		inv := decide.Inventory{At: h.Now}
		for _, m := range h.Snap.Machines {
			if m.ProviderKey == key && m.ProviderID != "" {
				inv.Instances = append(inv.Instances, provisioner.Instance{ID: m.ProviderID, State: provisioner.StateRunning,
					LaunchedAt: m.CreatedAt, Tags: map[string]string{provisioner.TagMachine: m.ID}})
			}
		}
		h.Snap.Inventories[key], h.Snap.ListedAt[key] = inv, h.Now
	}
}

// incrementalChange makes one random change, or (most often) none.
func incrementalChange(h *decidetest.Harness, rng *rand.Rand, silent map[string]bool) {
	switch rng.IntN(18) {
	case 0:
		svc := h.Snap.Services[rng.IntN(len(h.Snap.Services))]
		c := *svc
		n := rng.IntN(6)
		c.Spec.Replicas = &n
		c.Metadata.Generation++
		swapService(h, &c)
	case 1:
		svc := h.Snap.Services[rng.IntN(len(h.Snap.Services))]
		c := *svc
		c.Spec.Env = map[string]string{"V": fmt.Sprint(rng.IntN(3))}
		c.Metadata.Generation++
		swapService(h, &c)
	case 2:
		if len(h.Snap.Machines) > 0 {
			m := h.Snap.Machines[rng.IntN(len(h.Snap.Machines))]
			silent[m.ID] = !silent[m.ID]
		}
	case 3:
		if len(h.Snap.Replicas) > 0 {
			r := h.Snap.Replicas[rng.IntN(len(h.Snap.Replicas))]
			if r.Machine != "" && r.State == api.ReplicaRunning {
				c := *r
				if _, err := replica.Observe(&c, api.ReplicaStatus{ReplicaID: r.ID, State: api.ReplicaCrashed, Health: api.HealthUnhealthy}, "", h.Now); err == nil {
					*r = c
				}
			}
		}
	case 4: // an operator deletes a replica
		if n := len(h.Snap.Replicas); n > 0 {
			i := rng.IntN(n)
			h.Snap.Replicas = append(h.Snap.Replicas[:i:i], h.Snap.Replicas[i+1:]...)
		}
	case 5: // an operator promotes a service's deployment
		svc := h.Snap.Services[rng.IntN(len(h.Snap.Services))].Metadata.Name
		h.Memory.Promotions = maps.Clone(h.Memory.Promotions)
		h.Memory.Promotions[svc] = h.Memory.Deployments[svc].Revision
	case 6: // a running replica's health check passes or fails
		if len(h.Snap.Replicas) > 0 {
			r := h.Snap.Replicas[rng.IntN(len(h.Snap.Replicas))]
			if r.State == api.ReplicaRunning {
				c := *r
				c.Health = []api.Health{api.HealthHealthy, api.HealthUnhealthy}[rng.IntN(2)]
				*r = c
			}
		}
	case 7: // the Secret a service reads is written again
		h.Snap.SecretRevisions = map[string]string{"api-token": fmt.Sprint(rng.IntN(3))}
	case 8: // an operator drains a machine: its replicas move, and each move ends
		if len(h.Snap.Machines) > 0 {
			m := h.Snap.Machines[rng.IntN(len(h.Snap.Machines))]
			if m.JoinState == api.JoinJoined {
				c := *m
				if changed, err := fleet.Drain(&c, "operator", h.Now.Add(10*time.Minute), h.Now); err == nil && changed {
					*m = c
				}
			}
		}
	}
}

// swapService replaces a service the way a write to the store does (the
// old object is never edited).
func swapService(h *decidetest.Harness, svc *api.Service) {
	for i, s := range h.Snap.Services {
		if s.Metadata.Name == svc.Metadata.Name {
			h.Snap.Services[i] = svc
		}
	}
}

// Among 50,000 machines heartbeating at the rate the defaults allow
// (every 10 s), one that stops is marked unreachable 30 s after its last
// heartbeat, by the first pass after that (passes every 2 s): the
// incremental loop sleeps until then, and wakes for no other machine.
func TestALostMachineAmong50000IsNoticedIn30Seconds(t *testing.T) {
	if testing.Short() {
		t.Skip("50,000 machines")
	}
	h := decidetest.New(t)
	h.Config.ResyncInterval = time.Hour
	h.Cluster("c", decidetest.Group("g", "small", 0, 60000))
	for range 50000 {
		h.Machine("c", "g", "small")
	}
	period := h.Config.HeartbeatIntervalFor(50000)
	if period != 10*time.Second {
		t.Fatalf("50,000 machines are told to heartbeat every %s, want 10s", period)
	}
	last := h.Pass()
	lost := h.Snap.Machines[12345]
	lastBeat := h.Now
	for waited := time.Duration(0); waited <= time.Minute; waited += 2 * time.Second {
		h.Step(2 * time.Second)
		for i, m := range h.Snap.Machines {
			// Each machine beats every 10 s, spread over the period.
			if m != lost && (h.Now.Sub(decidetest.Start)/(2*time.Second)+time.Duration(i))%5 == 0 {
				fleet.Heartbeat(m, h.Now)
			}
		}
		if decide.Asleep(h.Config, last, h.Snap, h.Now) {
			continue
		}
		last = h.Pass()
		if len(last.Unreachable) == 0 {
			continue
		}
		if len(last.Unreachable) != 1 || last.Unreachable[0].Machine != lost.ID {
			t.Fatalf("marked unreachable: %+v, want only %s", last.Unreachable, lost.ID)
		}
		if silent := h.Now.Sub(lastBeat); silent > 32*time.Second {
			t.Fatalf("noticed after %s of silence, want 30 s (and the next pass)", silent)
		}
		return
	}
	t.Fatalf("the lost machine %s was not noticed within a minute", lost.ID)
}
