package machines

import (
	"sync"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
)

// Observations are what Describe and List calls found, kept until a pass
// takes them (inventories once; instances until the machine is gone).
type Observations struct {
	mu          sync.Mutex
	instances   map[string]decide.InstanceObservation
	inventories map[string]decide.Inventory
	listedAt    map[string]time.Time
}

// NewObservations returns empty observations.
func NewObservations() *Observations {
	return &Observations{instances: map[string]decide.InstanceObservation{}, inventories: map[string]decide.Inventory{}, listedAt: map[string]time.Time{}}
}

// Reset forgets everything: a new term lists and describes afresh.
func (o *Observations) Reset() {
	fresh := NewObservations()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.instances, o.inventories, o.listedAt = fresh.instances, fresh.inventories, fresh.listedAt
}

func (o *Observations) described(machine string, obs decide.InstanceObservation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.instances[machine] = obs
}

// Listed keeps a provider instance's inventory for the next pass.
func (o *Observations) Listed(key string, inv decide.Inventory) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.inventories[key] = inv
	o.listedAt[key] = inv.At
}

// Relist forgets that keys were listed: a pass that took their
// inventories failed before acting on them.
func (o *Observations) Relist(keys map[string]decide.Inventory) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k := range keys {
		delete(o.listedAt, k)
	}
}

// KeepLaunching drops what was observed of machines that joined or are
// gone: only launches are followed by Describe.
func (o *Observations) KeepLaunching(machines []*api.Machine) {
	launching := map[string]bool{}
	for _, m := range machines {
		if m.Launching() {
			launching[m.ID] = true
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for id := range o.instances {
		if !launching[id] {
			delete(o.instances, id)
		}
	}
}

// View copies the observations for a pass; with take, inventories are
// handed over (each is judged by one pass only).
func (o *Observations) View(take bool) (map[string]decide.InstanceObservation, map[string]decide.Inventory, map[string]time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	instances := make(map[string]decide.InstanceObservation, len(o.instances))
	for k, v := range o.instances {
		instances[k] = v
	}
	listedAt := make(map[string]time.Time, len(o.listedAt))
	for k, v := range o.listedAt {
		listedAt[k] = v
	}
	if !take {
		return instances, map[string]decide.Inventory{}, listedAt
	}
	inventories := o.inventories
	o.inventories = map[string]decide.Inventory{}
	return instances, inventories, listedAt
}
