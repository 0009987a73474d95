// Package external is the provider of machines joined by hand (`gantry
// join-token`): bare metal, machines made outside Gantry. It provisions
// nothing and knows no instance: terminating such a machine forgets it (its
// agent is told it is gone and stops its replicas), and recovery finds no
// tagged instance to adopt or clean up.
package external

import (
	"context"

	"github.com/gantry-dev/gantry/provider/registry"
	"github.com/gantry-dev/gantry/provisioner"
)

// Name is the provider of hand-joined machines.
const Name = "external"

// Provider provisions nothing.
type Provider struct{}

var _ provisioner.Provisioner = Provider{}

// Name implements provisioner.Provisioner.
func (Provider) Name() string { return Name }

// Launch is unsupported: machines of this provider join by themselves.
func (Provider) Launch(context.Context, provisioner.LaunchSpec) (*provisioner.Instance, error) {
	return nil, provisioner.Errorf(provisioner.KindUnsupported, "launch", "external machines are joined by hand (gantry join-token), not launched")
}

// Terminate has nothing to do: the machine is not Gantry's to turn off.
func (Provider) Terminate(context.Context, string) error { return nil }

// Describe knows no instance.
func (Provider) Describe(_ context.Context, id string) (*provisioner.Instance, error) {
	return nil, provisioner.Errorf(provisioner.KindNotFound, "describe", "external machines have no provider instance (%s)", id)
}

// List finds no tagged instance.
func (Provider) List(context.Context, provisioner.Filter) ([]provisioner.Instance, error) {
	return nil, nil
}

// InstanceTypes is empty: an external machine is what its agent reports.
func (Provider) InstanceTypes() []provisioner.InstanceType { return nil }

// Entry registers the provider.
func Entry() registry.Entry {
	return registry.Entry{Name: Name, New: func(string) (provisioner.Provisioner, error) { return Provider{}, nil }}
}
