package clouds_test

import (
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provider/clouds"
	"github.com/gantry-dev/gantry/provider/registry"
)

// Network mode routed on the clouds: aws with a route table named, gcp
// always, azure with a route table; without one they are refused, saying
// why.
func TestRoutedModeOnTheClouds(t *testing.T) {
	reg := registry.New(nil, clouds.New(clouds.Config{}).Entries()...)
	agent := map[string]string{}
	azure := map[string]string{"subscriptionId": "0", "resourceGroup": "rg", "image": "a:b:c:d", "subnetId": "/s", "sshPublicKey": "ssh-ed25519 AAAA"}
	for name, c := range map[string]struct {
		spec    api.ProviderSpec
		refused string
	}{
		"aws without a route table":   {api.ProviderSpec{Name: "aws", Region: "us-east-1", Config: with(agent, "imageId", "ami-1")}, "routeTableId: required"},
		"aws with one":                {api.ProviderSpec{Name: "aws", Region: "us-east-1", Config: with(agent, "imageId", "ami-1", "routeTableId", "rtb-1")}, ""},
		"gcp":                         {api.ProviderSpec{Name: "gcp", Region: "us-central1", Config: with(agent, "project", "p", "image", "i", "network", "global/networks/default")}, ""},
		"azure without a route table": {api.ProviderSpec{Name: "azure", Region: "eastus", Config: with(azure)}, "routeTable: required"},
		"azure with one":              {api.ProviderSpec{Name: "azure", Region: "eastus", Config: with(azure, "routeTable", "gantry-routes")}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			err := reg.Routes(c.spec)
			if c.refused == "" && err != nil || c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)) {
				t.Fatalf("routed: %v, want %q", err, c.refused)
			}
		})
	}
}

func with(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}
