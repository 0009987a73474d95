package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/playback"
	"github.com/gantry-dev/gantry/fleet"
	"github.com/gantry-dev/gantry/provider/registry"
	"github.com/gantry-dev/gantry/provisioner"
)

// cloud is the simulated provider: it answers the plan's launch and
// terminate calls after the world's latencies, fails launches for want of
// capacity and takes spot machines back at the world's odds, answers
// describes and lists from what it holds, and bills every instance from
// its launch's answer until it is gone.
type cloud struct {
	world    World
	rng      *rand.Rand
	w        *playback.World
	mem      *decide.Memory
	changes  *changes
	agenda   *agenda
	ledger   *ledger
	outcomes int
	// instances are every instance launched, by machine id.
	instances map[string]*instance
	// order is the instances by launch, for lists in a stable order;
	// unpruned is how many of them went since it was last pruned.
	order    []*instance
	unpruned int
	// launched counts the instances launched: each one's address is
	// drawn from it, so that no two share one while both run.
	launched int
	// silent are the machines whose instance is gone that the store may
	// still hold joined and heard from: the only joined machines that do
	// not heartbeat (a machine joins only with its instance there), and
	// the only ones that may fall silent (silentAt). Few, not every
	// machine looked up at every instant.
	silent map[string]bool
	// beat is the time of the instant's heartbeats, which the joined
	// machines that heartbeat all point to (set in place each instant,
	// not a walk of every machine); unbeaten are the machines that may
	// have to be pointed at it again (joined, started, marked
	// unreachable, or every one at first: beatAll).
	beat     *time.Time
	unbeaten map[string]bool
	beatAll  bool
}

// instance is one machine's instance at the provider.
type instance struct {
	machine  string
	key      string
	id       string
	launched time.Time
	address  string
	// tags are its tags, made once: a list answers with the same map
	// (nothing a pass does writes an inventory's tags).
	tags map[string]string
	gone bool
	// goneBy says how it went (interrupted, terminated).
	goneBy string
}

var _ playback.Provider = (*cloud)(nil)

// Launch sends the call: its answer comes after the launch latency.
func (c *cloud) Launch(m *api.Machine) (provisioner.Instance, bool) {
	c.w.Snap.InFlight[decide.CallKey(decide.CallLaunch, m.ID)] = true
	c.agenda.add(event{At: c.w.Now.Add(c.world.LaunchLatency.draw(c.rng)), Kind: launchAnswered, Machine: m.ID})
	return provisioner.Instance{}, false
}

// Terminate sends the call: an instance already gone is done with at
// once, others go after the terminate latency.
func (c *cloud) Terminate(m *api.Machine) bool {
	inst := c.instances[m.ID]
	if inst == nil || inst.gone {
		return true
	}
	c.w.Snap.InFlight[decide.CallKey(decide.CallTerminate, m.ID)] = true
	c.agenda.add(event{At: c.w.Now.Add(c.world.TerminateLatency.draw(c.rng)), Kind: terminated, Machine: m.ID})
	return false
}

// Start answers a warm-pool machine's start at once, at the address its
// instance had (none when its instance went).
func (c *cloud) Start(m *api.Machine) []string {
	if inst := c.instances[m.ID]; inst != nil && !inst.gone {
		return []string{inst.address}
	}
	return nil
}

// launchAnswered: the instance exists (billed from now, its agent joins
// after the boot, a spot one may be taken back), or the launch ran out of
// capacity.
func (c *cloud) launchAnswered(id string) error {
	delete(c.w.Snap.InFlight, decide.CallKey(decide.CallLaunch, id))
	m := c.w.MachineByID(id)
	if m == nil || m.JoinState != api.JoinProvisioning || m.ProviderID != "" {
		return nil // the intent was given up meanwhile (its join timed out)
	}
	c.changes.machine(m.ID)
	o := decide.Outcome{Call: decide.CallLaunch, Machine: m.ID, Cluster: m.Cluster, Group: m.Group, InstanceType: m.InstanceType,
		Zone: m.Zone, CapacityType: m.CapacityType, At: c.w.Now}
	odds := c.world.InsufficientCapacity.OnDemand
	if m.CapacityType == api.CapacitySpot {
		odds = c.world.InsufficientCapacity.Spot
	}
	if odds > 0 && c.rng.Float64() < odds {
		err := fmt.Sprintf("%s in %s (%s): insufficient capacity", m.InstanceType, m.Zone, m.CapacityType)
		o.Kind, o.Error = provisioner.KindInsufficientCapacity, err
		c.outcome(o)
		c.ledger.launchFailed()
		c.changes.ended(m.ID)
		return fleet.LaunchFailed(m, err, c.w.Now)
	}
	inst := &instance{machine: m.ID, key: registry.KeyOf(m), id: "i-" + m.ID, launched: c.w.Now, tags: map[string]string{provisioner.TagMachine: m.ID},
		address: playback.InstanceAddress(c.launched)}
	c.instances[m.ID] = inst
	c.order = append(c.order, inst)
	c.launched++
	c.outcome(o)
	c.ledger.billFrom(m, c.w.Now)
	c.agenda.add(event{At: c.w.Now.Add(c.world.BootToJoin.draw(c.rng)), Kind: agentJoins, Machine: m.ID})
	if m.CapacityType == api.CapacitySpot {
		if after, ok := c.world.interruptionAfter(c.rng); ok {
			c.agenda.add(event{At: c.w.Now.Add(after), Kind: interrupted, Machine: m.ID})
		}
	}
	return fleet.Launched(m, provisioner.Instance{ID: inst.id, State: provisioner.StatePending, LaunchedAt: c.w.Now,
		Addresses: []string{inst.address}}, c.w.Now)
}

// outcome leaves a call's outcome for the next pass, as a worker does.
func (c *cloud) outcome(o decide.Outcome) {
	c.outcomes++
	id := fmt.Sprintf("sim-%d", c.outcomes)
	c.mem.Outcomes[id] = o
	c.changes.memory(decide.OutcomeKey(id))
}

// agentJoins: the machine's agent joins, if its instance is still there.
func (c *cloud) agentJoins(id string) error {
	m, inst := c.w.MachineByID(id), c.instances[id]
	if m == nil || inst == nil || inst.gone || !m.Launching() {
		return nil
	}
	c.changes.machine(m.ID)
	c.unbeat(m.ID)
	return fleet.Joined(m, c.w.AgentInventory(m), c.w.Now)
}

// terminated: the terminate call's instance is gone.
func (c *cloud) terminated(id string) error {
	delete(c.w.Snap.InFlight, decide.CallKey(decide.CallTerminate, id))
	c.gone(id, "terminated")
	m := c.w.MachineByID(id)
	if m == nil || m.FleetState != api.FleetTerminating {
		return nil
	}
	c.changes.ended(m.ID)
	return fleet.SetFleetState(m, api.FleetTerminated, c.w.Now)
}

// interrupted: the provider takes a spot machine back; its agent goes
// silent and its replicas stop.
func (c *cloud) interrupted(id string) bool {
	inst := c.instances[id]
	if inst == nil || inst.gone {
		return false
	}
	c.gone(id, "interrupted")
	return true
}

func (c *cloud) gone(id, by string) {
	inst := c.instances[id]
	if inst == nil || inst.gone {
		return
	}
	inst.gone, inst.goneBy = true, by
	c.unpruned++
	c.lastBeat(id)
	c.silent[id] = true
	c.ledger.billUntil(id, c.w.Now)
}

// alive reports whether a machine's instance runs.
func (c *cloud) alive(machine string) bool {
	inst := c.instances[machine]
	return inst != nil && !inst.gone
}

// describe answers a plan's describes: what the provider says of each
// machine's instance now.
func (c *cloud) describe(ids []string) {
	for _, id := range ids {
		inst := c.instances[id]
		obs := decide.InstanceObservation{Found: inst != nil && !inst.gone, State: provisioner.StateRunning, At: c.w.Now}
		if !obs.Found {
			obs.State = provisioner.StateTerminated
		}
		c.w.Snap.Instances[id] = obs
	}
}

// list answers a plan's lists: every instance of the key still there,
// tagged with its machine.
func (c *cloud) list(keys []string) {
	for _, key := range keys {
		inv := decide.Inventory{At: c.w.Now, Instances: make([]provisioner.Instance, 0, len(c.order))}
		for _, inst := range c.order {
			if inst.key == key && !inst.gone {
				inv.Instances = append(inv.Instances, provisioner.Instance{ID: inst.id, State: provisioner.StateRunning, LaunchedAt: inst.launched,
					Tags: inst.tags})
			}
		}
		c.w.Snap.Inventories[key] = inv
		c.w.Snap.ListedAt[key] = c.w.Now
	}
	if c.unpruned > len(c.order)/4 { // a walk of every instance now and then, not whenever one went
		c.order = slices.DeleteFunc(c.order, func(i *instance) bool { return i.gone })
		c.unpruned = 0
	}
}

// heartbeat makes every joined machine whose instance runs heartbeat now.
// Those that did at the last instant point to the instant's beat, set in
// place: the machines whose time of their own may need a beat again are
// those noted unbeaten since (a machine stays joined until it leaves the
// store, and goes silent only with its instance: gone).
func (c *cloud) heartbeat() {
	*c.beat = c.w.Now.UTC()
	if c.beatAll {
		c.beatAll = false
		for _, m := range c.w.Snap.Machines {
			c.beatOn(m)
		}
		clear(c.unbeaten)
		return
	}
	for id := range c.unbeaten {
		if m := c.w.MachineByID(id); m != nil {
			c.beatOn(m)
		}
	}
	clear(c.unbeaten)
}

// beatOn makes m heartbeat now if it is joined and its instance runs.
func (c *cloud) beatOn(m *api.Machine) {
	if m.JoinState != api.JoinJoined || len(c.silent) > 0 && c.silent[m.ID] {
		return
	}
	if m.UnreachableSince != nil {
		fleet.Heartbeat(m, c.w.Now)
		c.changes.machine(m.ID) // it came back
	}
	m.LastHeartbeat = c.beat
}

// unbeat notes a machine whose heartbeat may no longer be the instant's
// beat (it joined, started, or was marked unreachable).
func (c *cloud) unbeat(id string) { c.unbeaten[id] = true }

// lastBeat keeps a machine that falls silent at the last beat it sent.
func (c *cloud) lastBeat(id string) {
	if m := c.w.MachineByID(id); m != nil && m.LastHeartbeat == c.beat {
		at := *c.beat
		m.LastHeartbeat = &at
	}
}
