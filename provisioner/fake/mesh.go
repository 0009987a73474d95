package fake

import (
	"context"
	"maps"
	"slices"

	"github.com/gantry-dev/gantry/provisioner"
)

var _ provisioner.MeshFirewaller = (*Provider)(nil)

// SweepMeshFirewalls implements provisioner.MeshFirewaller as a cloud
// would: the firewall of a cluster not in keep goes, unless an instance of
// the cluster that is not terminated still holds it.
func (p *Provider) SweepMeshFirewalls(ctx context.Context, installation string, keep map[string]bool) error {
	done, err := p.begin(ctx, OpSweep)
	if err != nil {
		return err
	}
	p.mu.Lock()
	for cluster := range p.firewalls {
		if keep[cluster] || p.heldLocked(cluster) {
			continue
		}
		delete(p.firewalls, cluster)
	}
	p.mu.Unlock()
	done(Call{})
	return nil
}

func (p *Provider) heldLocked(cluster string) bool {
	for _, r := range p.instances {
		if r.Tags[provisioner.TagCluster] == cluster && r.State != provisioner.StateTerminated {
			return true
		}
	}
	return false
}

// Firewalls are the clusters whose overlay firewall exists, sorted.
func (p *Provider) Firewalls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.firewalls))
}
