// Package registry lists the providers a Gantry server knows, each once:
// its name, built-in catalog, the runtimes its machines offer, the check
// of a cluster's provider settings, the key of the provider instance those
// settings need, and the factory that makes it. Spec validation, the
// server, the CLI, crash recovery and `gantry plan` all read it.
package registry

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
)

// Entry is one provider.
type Entry struct {
	Name string
	// Runtimes are what its machines offer before their agents report.
	Runtimes []string
	// Catalog is its built-in catalog for a cluster's settings; nil when
	// the catalog is not built in (exec's lives in the server's settings).
	Catalog func(api.ProviderSpec) ([]provisioner.InstanceType, bool)
	// Check validates a cluster's provider settings, naming the field; nil
	// accepts any.
	Check func(api.ProviderSpec) error
	// Key names the provider instance a cluster's settings need (one per
	// region, say); nil means one instance, keyed by Name. A key is Name,
	// or Name followed by ':' and more.
	Key func(api.ProviderSpec) string
	// New makes the instance for a key; nil where the provider is only
	// described (offline validation), or not configured on this server.
	New func(key string) (provisioner.Provisioner, error)
	// Unavailable says why New is nil on this server, if it is.
	Unavailable string
	// Provisions is false for a provider that launches nothing (external:
	// machines joined by hand).
	Provisions bool
	// CanStop: its instances can be stopped and started again
	// (provisioner.Stopper), for warm pools of stopped machines.
	CanStop bool
	// AgentBinaries says whether its machines download the gantry binary
	// (a cluster's spec.agent.binaries).
	AgentBinaries Binaries
	// Routes says why its network cannot route each machine's /24 to the
	// machine with a cluster's settings (network mode routed), nil if it
	// can; a nil Routes never can.
	Routes func(api.ProviderSpec) error
	// NetworkMode is the network mode a new cluster of this provider gets
	// when its spec names none ("" is host): overlay for providers whose
	// machines may sit on different networks.
	NetworkMode string
}

// Binaries is whether a provider's machines download the agent binary.
type Binaries int

// What a provider does with spec.agent.binaries.
const (
	// BinariesNone: its machines run the server's own binary.
	BinariesNone Binaries = iota
	// BinariesOptional: its machines may boot from user data that
	// downloads them (exec, when its settings render cloud-init).
	BinariesOptional
	// BinariesRequired: its machines boot from cloud-init that downloads
	// them (the clouds).
	BinariesRequired
)

// Registry holds the entries and the provider instances made so far.
type Registry struct {
	entries map[string]Entry
	wrap    func(provisioner.Provisioner) provisioner.Provisioner

	mu        sync.Mutex
	instances map[string]provisioner.Provisioner
}

// New returns a registry of entries; wrap (may be nil) wraps every
// instance made (tests inject faults).
func New(wrap func(provisioner.Provisioner) provisioner.Provisioner, entries ...Entry) *Registry {
	r := &Registry{entries: map[string]Entry{}, wrap: wrap, instances: map[string]provisioner.Provisioner{}}
	for _, e := range entries {
		r.entries[e.Name] = e
	}
	return r
}

// Names are the providers, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.entries))
	for n := range r.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns a provider's entry.
func (r *Registry) Lookup(name string) (Entry, bool) {
	e, ok := r.entries[name]
	return e, ok
}

// Catalog is a provider's built-in catalog for a cluster's settings.
func (r *Registry) Catalog(p api.ProviderSpec) ([]provisioner.InstanceType, bool) {
	e, ok := r.entries[p.Name]
	if !ok || e.Catalog == nil {
		return nil, false
	}
	return e.Catalog(p)
}

// RequiresAgentBinaries implements spec.Providers.
func (r *Registry) RequiresAgentBinaries(name string) bool {
	return r.entries[name].AgentBinaries == BinariesRequired
}

// AcceptsAgentBinaries implements spec.Providers.
func (r *Registry) AcceptsAgentBinaries(name string) bool {
	return r.entries[name].AgentBinaries != BinariesNone
}

// NetworkMode is the mode a new cluster of the provider gets by default.
func (r *Registry) NetworkMode(provider string) string {
	return cmp.Or(r.entries[provider].NetworkMode, api.NetworkHost)
}

// Routes implements spec.Providers.
func (r *Registry) Routes(p api.ProviderSpec) error {
	e, ok := r.entries[p.Name]
	if !ok || e.Routes == nil {
		return fmt.Errorf("provider %s does not route each machine's /24 to it", p.Name)
	}
	return e.Routes(p)
}

// Runtimes are what a provider's machines offer before their agents
// report.
func (r *Registry) Runtimes(name string) []string { return slices.Clone(r.entries[name].Runtimes) }

// Key checks a cluster's provider settings and names the instance they
// need.
func (r *Registry) Key(p api.ProviderSpec) (string, error) {
	e, ok := r.entries[p.Name]
	if !ok {
		return "", fmt.Errorf("unknown provider %q (known: %s)", p.Name, strings.Join(r.Names(), ", "))
	}
	if e.New == nil {
		why := e.Unavailable
		if why == "" {
			why = "not available on this server"
		}
		return "", fmt.Errorf("provider %s: %s", p.Name, why)
	}
	if e.Check != nil {
		if err := e.Check(p); err != nil {
			return "", err
		}
	}
	if e.Key == nil {
		return e.Name, nil
	}
	return e.Key(p), nil
}

// For returns the key and the instance for a cluster's provider settings.
func (r *Registry) For(p api.ProviderSpec) (string, provisioner.Provisioner, error) {
	key, err := r.Key(p)
	if err != nil {
		return "", nil, err
	}
	prov, err := r.Get(key)
	return key, prov, err
}

// Get returns the instance for a key, making it on first use: a machine
// whose cluster is gone still reaches its provider by its key.
func (r *Registry) Get(key string) (provisioner.Provisioner, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if prov, ok := r.instances[key]; ok {
		return prov, nil
	}
	name, _, _ := strings.Cut(key, ":")
	e, ok := r.entries[name]
	if !ok || e.New == nil {
		return nil, fmt.Errorf("provider %q is not available on this server", key)
	}
	prov, err := e.New(key)
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", key, err)
	}
	if r.wrap != nil {
		prov = r.wrap(prov)
	}
	r.instances[key] = prov
	return prov, nil
}

// Keys are the keys of the instances made so far, sorted.
func (r *Registry) Keys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.instances))
	for k := range r.instances {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// KeyOf is the key of a machine's provider instance (machines recorded
// before keys existed have only the provider name).
func KeyOf(m *api.Machine) string {
	if m.ProviderKey != "" {
		return m.ProviderKey
	}
	return m.Provider
}

// Static is an entry for one fixed instance with no per-cluster settings
// (tests, and providers configured once per server).
func Static(p provisioner.Provisioner, runtimes ...string) Entry {
	_, canStop := p.(provisioner.Stopper)
	return Entry{Name: p.Name(), Runtimes: runtimes, Provisions: true, CanStop: canStop,
		Catalog: func(api.ProviderSpec) ([]provisioner.InstanceType, bool) { return p.InstanceTypes(), true },
		New:     func(string) (provisioner.Provisioner, error) { return p, nil }}
}
