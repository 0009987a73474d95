// Package clouds assembles the cloud providers (aws, gcp, azure) for the
// server: which provider instance a cluster's settings need, making it,
// and the built-in catalogs. It is kept apart from the server so that what
// does not need the cloud SDKs (the server's tests, the race-instrumented
// test builds) does not compile them.
package clouds

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/gantry-dev/gantry/api"
	awsprov "github.com/gantry-dev/gantry/provider/aws"
	"github.com/gantry-dev/gantry/provider/aws/awscatalog"
	azureprov "github.com/gantry-dev/gantry/provider/azure"
	gcpprov "github.com/gantry-dev/gantry/provider/gcp"
	"github.com/gantry-dev/gantry/provider/registry"
	"github.com/gantry-dev/gantry/provisioner"
)

// Config points providers at other endpoints (an emulator, or a fake in
// tests).
type Config struct {
	AWSEndpoint string
	GCPEndpoint string
	GCPNoAuth   bool
}

// Factory makes cloud provider instances.
type Factory struct{ cfg Config }

// New returns a factory.
func New(cfg Config) *Factory { return &Factory{cfg: cfg} }

// Names are the cloud providers.
func (f *Factory) Names() []string { return []string{awsprov.Name, azureprov.Name, gcpprov.Name} }

// Key names the instance a cluster's provider settings need (provider,
// region, account), checking the settings; ok is false for a provider that
// is not a cloud.
func (f *Factory) Key(p api.ProviderSpec) (key string, ok bool, err error) {
	switch p.Name {
	case awsprov.Name:
		if p.Region == "" {
			return "", true, fmt.Errorf("spec.provider.region: required for aws")
		}
		if _, err := awsprov.ParseSettings(p.Config); err != nil {
			return "", true, err
		}
		return awsprov.Name + ":" + p.Region, true, nil
	case gcpprov.Name:
		if p.Region == "" {
			return "", true, fmt.Errorf("spec.provider.region: required for gcp")
		}
		settings, err := gcpprov.ParseSettings(p.Config)
		if err != nil {
			return "", true, err
		}
		return gcpprov.Name + ":" + p.Region + ":" + settings.Project, true, nil
	case azureprov.Name:
		if p.Region == "" {
			return "", true, fmt.Errorf("spec.provider.region: required for azure (the location, such as eastus)")
		}
		settings, err := azureprov.ParseSettings(p.Config)
		if err != nil {
			return "", true, err
		}
		return azureprov.Name + ":" + p.Region + ":" + settings.SubscriptionID + "/" + settings.ResourceGroup, true, nil
	}
	return "", false, nil
}

// Make makes the instance a key names; ok is false for a key that is not a
// cloud's.
func (f *Factory) Make(key string) (prov provisioner.Provisioner, ok bool, err error) {
	name, rest, _ := strings.Cut(key, ":")
	switch name {
	case awsprov.Name:
		cfg := awsprov.DefaultConfig(rest)
		cfg.Endpoint = f.cfg.AWSEndpoint
		prov, err = awsprov.New(context.Background(), cfg)
		return prov, true, err
	case gcpprov.Name:
		region, project, _ := strings.Cut(rest, ":")
		prov, err = gcpprov.New(context.Background(), gcpprov.Config{Project: project, Region: region, Endpoint: f.cfg.GCPEndpoint, NoAuth: f.cfg.GCPNoAuth})
		return prov, true, err
	case azureprov.Name:
		location, scope, _ := strings.Cut(rest, ":")
		subscription, group, _ := strings.Cut(scope, "/")
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, true, fmt.Errorf("azure credentials: %w", err)
		}
		prov, err = azureprov.New(azureprov.Config{Location: location, SubscriptionID: subscription, ResourceGroup: group, Credential: cred})
		return prov, true, err
	}
	return nil, false, nil
}

// Entries registers the clouds: each one's settings check, instance
// key, built-in catalog for the cluster's region, and factory. Their
// machines boot from cloud-init that downloads the cluster's
// agent.binaries, and run the docker runtime.
func (f *Factory) Entries() []registry.Entry {
	var out []registry.Entry
	for _, name := range f.Names() {
		out = append(out, registry.Entry{
			Name: name, Runtimes: []string{"docker"}, Provisions: true, CanStop: true, AgentBinaries: registry.BinariesRequired, NetworkMode: api.NetworkOverlay,
			Catalog: Catalog,
			Check:   func(p api.ProviderSpec) error { _, _, err := f.Key(p); return err },
			Routes:  Routes,
			Key:     func(p api.ProviderSpec) string { key, _, _ := f.Key(p); return key },
			New: func(key string) (provisioner.Provisioner, error) {
				prov, _, err := f.Make(key)
				return prov, err
			},
		})
	}
	return out
}

// Catalog is a cloud's built-in catalog with offerings in region (its
// default region when empty).
func Catalog(p api.ProviderSpec) ([]provisioner.InstanceType, bool) {
	switch p.Name {
	case awsprov.Name:
		return awscatalog.CatalogFor(p.Region)
	case gcpprov.Name:
		return gcpprov.CatalogFor(p.Region), true
	case azureprov.Name:
		return azureprov.Catalog(cmp.Or(p.Region, "eastus")), true
	}
	return nil, false
}

// Routes says whether a cloud's network routes each machine's /24 to it
// with a cluster's settings (network mode routed): an EC2 route table
// or an Azure one the settings name, a GCE route on the cluster's
// network.
func Routes(p api.ProviderSpec) error {
	switch p.Name {
	case awsprov.Name:
		return awsprov.Routes(p)
	case gcpprov.Name:
		return gcpprov.Routes(p)
	case azureprov.Name:
		return azureprov.Routes(p)
	}
	return fmt.Errorf("provider %s does not route each machine's /24 to it", p.Name)
}
