package azure_test

import (
	"context"
	"encoding/base64"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7/fake"
	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provider/azure"
	"github.com/gantry-dev/gantry/provider/azure/azurefake"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/provisionertest"
)

var settings = map[string]string{
	"subscriptionId": "00000000-0000-0000-0000-000000000000", "resourceGroup": "gantry-test",
	"image": "Canonical:ubuntu-24_04-lts:server:latest", "subnetId": "/subscriptions/0/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/v/subnets/s",
	"sshPublicKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGantryTestKey gantry",
}

// newProvider runs the real armcompute client through the SDK's fake
// transport, served by an in-memory region.
func newProvider(t *testing.T, cloud *azurefake.Cloud) *azure.Provider {
	t.Helper()
	opts := &arm.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: fake.NewVirtualMachinesServerTransport(cloud.Server())}}
	p, err := azure.New(azure.Config{Location: "eastus", SubscriptionID: settings["subscriptionId"], ResourceGroup: "gantry-test",
		Credential: &azfake.TokenCredential{}, ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func withSettings(s *provisioner.LaunchSpec) { s.Config, s.Region = settings, "eastus" }

func TestContract(t *testing.T) {
	provisionertest.RunWith(t, func(t *testing.T) provisioner.Provisioner {
		cloud := azurefake.New()
		cloud.PageSize = 2
		return newProvider(t, cloud)
	}, provisionertest.Options{Timeout: 20 * time.Second, Poll: 10 * time.Millisecond, Spec: withSettings})
}

func launchSpec(key string) provisioner.LaunchSpec {
	s := provisioner.LaunchSpec{InstanceType: "Standard_NC4as_T4_v3", Zone: "eastus-2", CapacityType: "spot", IdempotencyKey: key,
		Tags: map[string]string{provisioner.TagManagedBy: provisioner.ManagedByValue, provisioner.TagMachine: "prod-gpu-1"},
		Bootstrap: provisioner.Bootstrap{ServerURL: "https://gantry.internal:7400", Cluster: "prod", Group: "gpu", MachineID: "prod-gpu-1", JoinToken: "gjt1.secret",
			AgentBinaries: map[string]api.AgentBinary{"amd64": {URL: "https://downloads.example.com/gantry-amd64", SHA256: strings.Repeat("a", 64)}}}}
	withSettings(&s)
	return s
}

func TestCreateRequest(t *testing.T) {
	cloud := azurefake.New()
	p := newProvider(t, cloud)
	inst, err := p.Launch(context.Background(), launchSpec("lk-1"))
	if err != nil {
		t.Fatal(err)
	}
	vm, ok := cloud.VM("gantry-test", inst.ID)
	if !ok {
		t.Fatal("VM not created")
	}
	if *vm.Tags["gantry.dev:machine"] != "prod-gpu-1" || inst.Tags[provisioner.TagMachine] != "prod-gpu-1" {
		t.Errorf("tags: %v / %v", vm.Tags, inst.Tags)
	}
	props := vm.Properties
	data, _ := base64.StdEncoding.DecodeString(*props.OSProfile.CustomData)
	if !strings.HasPrefix(string(data), "#cloud-config") || !strings.Contains(string(data), "prod-gpu-1") {
		t.Errorf("custom data is not the machine's cloud-config")
	}
	if string(*props.Priority) != "Spot" || string(*props.EvictionPolicy) != "Delete" || *vm.Zones[0] != "2" {
		t.Errorf("spot %v eviction %v zones %v", *props.Priority, *props.EvictionPolicy, vm.Zones)
	}
	if *props.StorageProfile.ImageReference.Offer != "ubuntu-24_04-lts" || string(*props.HardwareProfile.VMSize) != "Standard_NC4as_T4_v3" {
		t.Errorf("image/size")
	}
	if inst.State != provisioner.StatePending || inst.Zone != "eastus-2" || inst.CapacityType != "spot" {
		t.Errorf("instance %+v", inst)
	}
	again, err := p.Launch(context.Background(), launchSpec("lk-1"))
	if err != nil || again.ID != inst.ID {
		t.Fatalf("retried launch: %v %v", again, err)
	}
}

func TestErrorsAreTyped(t *testing.T) {
	for code, c := range map[string]struct {
		status int
		kind   provisioner.ErrorKind
	}{
		"SkuNotAvailable":       {409, provisioner.KindInsufficientCapacity},
		"ZonalAllocationFailed": {409, provisioner.KindInsufficientCapacity},
		"AuthorizationFailed":   {403, provisioner.KindAuth},
		"InvalidParameter":      {400, provisioner.KindInvalid},
	} {
		cloud := azurefake.New()
		cloud.FailCreate(c.status, code)
		_, err := newProvider(t, cloud).Launch(context.Background(), launchSpec("lk-"+code))
		if provisioner.KindOf(err) != c.kind || !strings.Contains(err.Error(), code) {
			t.Errorf("%s: %v, want kind %s", code, err, c.kind)
		}
	}
	if _, err := azure.ParseSettings(map[string]string{"image": "x"}); err == nil || !strings.Contains(err.Error(), "spec.provider.config.subscriptionId: required") {
		t.Errorf("settings: %v", err)
	}
}

func TestStates(t *testing.T) {
	cloud := azurefake.New()
	p := newProvider(t, cloud)
	inst, err := p.Launch(context.Background(), launchSpec("lk-s"))
	if err != nil {
		t.Fatal(err)
	}
	var states []provisioner.State
	for i := 0; i < 4; i++ {
		got, _ := p.Describe(context.Background(), inst.ID)
		states = append(states, got.State)
	}
	if states[len(states)-1] != provisioner.StateRunning {
		t.Fatalf("Creating → starting → running: %v", states)
	}
	if err := p.Stop(context.Background(), inst.ID); err != nil {
		t.Fatal(err)
	}
	first, _ := p.Describe(context.Background(), inst.ID)
	second, _ := p.Describe(context.Background(), inst.ID)
	if first.State != provisioner.StateStopping || second.State != provisioner.StateStopped {
		t.Errorf("deallocating → deallocated: %s, %s", first.State, second.State)
	}
}

// TestRealAzure runs the contract against a real subscription. Opt in
// with GANTRY_AZURE_E2E=1; it creates (and deletes) billed VMs with
// azidentity's default credential. GANTRY_AZURE_LOCATION and
// GANTRY_AZURE_CONFIG (k=v;k=v: subscriptionId, resourceGroup, image,
// subnetId, sshPublicKey, ...) configure it.
func TestRealAzure(t *testing.T) {
	if os.Getenv("GANTRY_AZURE_E2E") != "1" {
		t.Skip("set GANTRY_AZURE_E2E=1 (and GANTRY_AZURE_LOCATION, GANTRY_AZURE_CONFIG) to run against a real subscription")
	}
	config := map[string]string{}
	for _, kv := range strings.Split(os.Getenv("GANTRY_AZURE_CONFIG"), ";") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			config[k] = v
		}
	}
	location := os.Getenv("GANTRY_AZURE_LOCATION")
	provisionertest.RunWith(t, func(t *testing.T) provisioner.Provisioner {
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := azure.New(azure.Config{Location: location, SubscriptionID: config["subscriptionId"], ResourceGroup: config["resourceGroup"], Credential: cred})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}, provisionertest.Options{Timeout: 15 * time.Minute, Poll: 10 * time.Second, Spec: func(s *provisioner.LaunchSpec) {
		s.Config, s.Region, s.InstanceType, s.Zone = config, location, "Standard_B2s", ""
	}})
}
