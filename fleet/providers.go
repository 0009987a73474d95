package fleet

import (
	"fmt"
	"sort"
	"sync"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provisioner"
)

// ProviderFactory makes provider instances. Key names the instance a
// cluster's provider settings need (one per provider and region, say); New
// makes it from the key alone, so a machine whose cluster is gone still
// reaches its provider.
type ProviderFactory interface {
	Key(p api.ProviderSpec) (string, error)
	New(key string) (provisioner.Provisioner, error)
}

// Providers holds the provider instances in use, made on first use.
type Providers struct {
	factory ProviderFactory
	wrap    func(provisioner.Provisioner) provisioner.Provisioner

	mu    sync.Mutex
	byKey map[string]provisioner.Provisioner
}

// NewProviders returns an empty set; wrap (may be nil) wraps every
// instance made (tests inject faults).
func NewProviders(f ProviderFactory, wrap func(provisioner.Provisioner) provisioner.Provisioner) *Providers {
	return &Providers{factory: f, wrap: wrap, byKey: map[string]provisioner.Provisioner{}}
}

// Get returns the instance for a key, making it if needed.
func (p *Providers) Get(key string) (provisioner.Provisioner, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if prov, ok := p.byKey[key]; ok {
		return prov, nil
	}
	prov, err := p.factory.New(key)
	if err != nil {
		return nil, err
	}
	if p.wrap != nil {
		prov = p.wrap(prov)
	}
	p.byKey[key] = prov
	return prov, nil
}

// For returns the key and instance for a cluster's provider settings.
func (p *Providers) For(spec api.ProviderSpec) (string, provisioner.Provisioner, error) {
	key, err := p.factory.Key(spec)
	if err != nil {
		return "", nil, err
	}
	prov, err := p.Get(key)
	return key, prov, err
}

// Keys are the keys of the instances made so far, sorted.
func (p *Providers) Keys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := make([]string, 0, len(p.byKey))
	for k := range p.byKey {
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

// Static is a factory of fixed instances keyed by name, for tests and for
// providers with no per-cluster settings.
type Static map[string]provisioner.Provisioner

// Key implements ProviderFactory.
func (s Static) Key(p api.ProviderSpec) (string, error) {
	if _, ok := s[p.Name]; !ok {
		return "", fmt.Errorf("provider %q is not configured", p.Name)
	}
	return p.Name, nil
}

// New implements ProviderFactory.
func (s Static) New(key string) (provisioner.Provisioner, error) {
	prov, ok := s[key]
	if !ok {
		return nil, fmt.Errorf("provider %q is not configured", key)
	}
	return prov, nil
}
