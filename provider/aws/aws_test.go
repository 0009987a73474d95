package aws_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provider/aws"
	"github.com/gantry-dev/gantry/provider/aws/awscatalog"
	"github.com/gantry-dev/gantry/provider/aws/ec2fake"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/provisionertest"
)

// isolate gives the SDK's default chain static test credentials and keeps
// it from looking anywhere else (no shared files, no instance metadata).
func isolate(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDGANTRYTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "gantry-test-secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent/gantry-test")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/gantry-test")
}

func newFake(t *testing.T) (*ec2fake.Server, string) {
	fake := ec2fake.New()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return fake, srv.URL
}

func newProvider(t *testing.T, endpoint string) *aws.Provider {
	t.Helper()
	isolate(t)
	cfg := aws.DefaultConfig("us-east-1")
	cfg.Endpoint, cfg.MaxAttempts = endpoint, 3
	p, err := aws.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var settings = map[string]string{
	"imageId": "ami-0123456789abcdef0", "subnets": "us-east-1a=subnet-aaa,us-east-1b=subnet-bbb,us-east-1c=subnet-ccc",
	"securityGroupIds": "sg-1,sg-2", "instanceProfile": "gantry-node",
}

func withSettings(s *provisioner.LaunchSpec) { s.Config, s.Region = settings, "us-east-1" }

// The contract, against a fake that is eventually consistent (new
// instances miss two describes) and pages by two.
func TestContract(t *testing.T) {
	provisionertest.RunWith(t, func(t *testing.T) provisioner.Provisioner {
		fake, url := newFake(t)
		fake.HiddenDescribes, fake.PageSize = 2, 2
		return newProvider(t, url)
	}, provisionertest.Options{Timeout: 20 * time.Second, Poll: 10 * time.Millisecond, Spec: withSettings})
}

func launchSpec(key string) provisioner.LaunchSpec {
	s := provisioner.LaunchSpec{InstanceType: "m6i.large", Zone: "us-east-1b", CapacityType: "spot", IdempotencyKey: key,
		Tags: map[string]string{provisioner.TagManagedBy: provisioner.ManagedByValue, provisioner.TagMachine: "prod-general-1"},
		Bootstrap: provisioner.Bootstrap{ServerURL: "https://gantry.internal:7400", Cluster: "prod", Group: "general", MachineID: "prod-general-1", JoinToken: "gjt1.secret",
			AgentBinaries: map[string]api.AgentBinary{"amd64": {URL: "https://downloads.example.com/gantry-amd64", SHA256: strings.Repeat("a", 64)}}}}
	withSettings(&s)
	return s
}

func TestRunInstancesRequest(t *testing.T) {
	fake, url := newFake(t)
	p := newProvider(t, url)
	inst, err := p.Launch(context.Background(), launchSpec("lk-1"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := fake.Instance(inst.ID)
	form := fake.LastRequest("RunInstances")
	if form.Get("ClientToken") != "lk-1" || got.Image != "ami-0123456789abcdef0" || got.Subnet != "subnet-bbb" || got.Zone != "us-east-1b" {
		t.Errorf("client token %q image %q subnet %q zone %q", form.Get("ClientToken"), got.Image, got.Subnet, got.Zone)
	}
	if got.Lifecycle != "spot" || form.Get("InstanceMarketOptions.SpotOptions.SpotInstanceType") != "one-time" {
		t.Errorf("spot not requested: %v", form)
	}
	if strings.Join(got.SecurityGroups, ",") != "sg-1,sg-2" || got.Profile != "gantry-node" {
		t.Errorf("security groups %v profile %q", got.SecurityGroups, got.Profile)
	}
	if got.Tags[provisioner.TagMachine] != "prod-general-1" || form.Get("TagSpecification.1.ResourceType") != "instance" {
		t.Errorf("tags at launch: %v", got.Tags)
	}
	if !strings.HasPrefix(got.UserData, "#cloud-config\n") || !strings.Contains(got.UserData, "prod-general-1") || !strings.Contains(got.UserData, "gjt1.secret") {
		t.Errorf("user data is not the machine's cloud-config:\n%s", got.UserData)
	}
	if inst.State != provisioner.StatePending || inst.CapacityType != "spot" || inst.Zone != "us-east-1b" {
		t.Errorf("instance %+v", inst)
	}
	// The same key again: the same instance (client token).
	again, err := p.Launch(context.Background(), launchSpec("lk-1"))
	if err != nil || again.ID != inst.ID {
		t.Fatalf("retried launch: %v %v", again, err)
	}
}

func TestErrorsAreTyped(t *testing.T) {
	for code, kind := range map[string]provisioner.ErrorKind{
		"InsufficientInstanceCapacity": provisioner.KindInsufficientCapacity,
		"SpotMaxPriceTooLow":           provisioner.KindInsufficientCapacity,
		"MaxSpotInstanceCountExceeded": provisioner.KindInsufficientCapacity,
		"UnauthorizedOperation":        provisioner.KindAuth,
		"AuthFailure":                  provisioner.KindAuth,
		"InvalidAMIID.NotFound":        provisioner.KindInvalid,
	} {
		fake, url := newFake(t)
		p := newProvider(t, url)
		fake.Fail("RunInstances", code, code, code)
		_, err := p.Launch(context.Background(), launchSpec("lk-"+code))
		if provisioner.KindOf(err) != kind || !strings.Contains(err.Error(), code) {
			t.Errorf("%s: got %v (kind %q), want kind %s", code, err, provisioner.KindOf(err), kind)
		}
	}
}

// Throttling is retried by the SDK with backoff; when it persists it is a
// transport error.
func TestThrottlingIsRetriedThenTransport(t *testing.T) {
	fake, url := newFake(t)
	p := newProvider(t, url)
	fake.Fail("RunInstances", "RequestLimitExceeded", "RequestLimitExceeded")
	if _, err := p.Launch(context.Background(), launchSpec("lk-t1")); err != nil {
		t.Fatalf("two throttles then success: %v", err)
	}
	if n := fake.Calls("RunInstances"); n != 3 {
		t.Errorf("RunInstances called %d times, want 3 (two retries)", n)
	}
	fake.Fail("DescribeInstances", "RequestLimitExceeded", "RequestLimitExceeded", "RequestLimitExceeded")
	if _, err := p.List(context.Background(), provisioner.Filter{}); provisioner.KindOf(err) != provisioner.KindTransport {
		t.Errorf("persistent throttling: %v", err)
	}
}

// EC2 lags: right after a launch the instance is not found; the provider
// says pending (it launched it), not gone. Terminated shows as
// terminating (shutting-down), then terminated.
func TestEventualConsistencyAndStates(t *testing.T) {
	fake, url := newFake(t)
	fake.HiddenDescribes = 3
	p := newProvider(t, url)
	inst, err := p.Launch(context.Background(), launchSpec("lk-ec"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Describe(context.Background(), inst.ID)
	if err != nil || got.State != provisioner.StatePending {
		t.Fatalf("describe right after launch: %+v %v", got, err)
	}
	listed, err := p.List(context.Background(), provisioner.Filter{Tags: map[string]string{provisioner.TagMachine: "prod-general-1"}})
	if err != nil || len(listed) != 1 {
		t.Fatalf("list right after launch: %v %v", listed, err)
	}
	if _, err := p.Describe(context.Background(), "i-00000000000000000"); !strings.Contains(err.Error(), "not-found") {
		t.Errorf("unknown instance: %v", err)
	}
	for i := 0; i < 5; i++ {
		got, _ = p.Describe(context.Background(), inst.ID)
	}
	if got.State != provisioner.StateRunning || len(got.Addresses) != 1 {
		t.Fatalf("after the lag: %+v", got)
	}
	if err := p.Terminate(context.Background(), inst.ID); err != nil {
		t.Fatal(err)
	}
	got, _ = p.Describe(context.Background(), inst.ID)
	if got.State != provisioner.StateTerminating {
		t.Errorf("shutting-down maps to %q", got.State)
	}
	fake.SetConsole(inst.ID, "[gantry-boot] download\n")
	if out, err := p.ConsoleOutput(context.Background(), inst.ID); err != nil || out != "[gantry-boot] download\n" {
		t.Errorf("console: %q %v", out, err)
	}
}

func TestSettingsNameTheBadKey(t *testing.T) {
	for want, cfg := range map[string]map[string]string{
		"spec.provider.config.imageId: required": {"securityGroupIds": "sg-1"},
		"spec.provider.config.colour: unknown":   {"imageId": "ami-1", "colour": "blue"},
		"spec.provider.config.subnets":           {"imageId": "ami-1", "subnets": "us-east-1a"},
		"spec.provider.config.agentRuntime":      {"imageId": "ami-1", "agentRuntime": "lxc"},
	} {
		if _, err := aws.ParseSettings(cfg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q, got %v", want, err)
		}
	}
}

// catalog.json is what gencatalog makes from catalogdata/.
func TestCatalogIsGenerated(t *testing.T) {
	var types awscatalog.DescribedTypes
	var prices awscatalog.Prices
	readJSON(t, "catalogdata/instance-types.json", &types)
	readJSON(t, "catalogdata/prices-us-east-1.json", &prices)
	built, skipped := awscatalog.BuildCatalog(types, prices)
	if len(skipped) != 0 {
		t.Errorf("types without a price: %v", skipped)
	}
	embedded, err := awscatalog.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(built)
	b, _ := json.Marshal(embedded)
	if string(a) != string(b) {
		t.Fatal("catalog.json is stale: go run ./provider/aws/gencatalog")
	}
	catalog := embedded.Catalog("eu-west-1", nil)
	g5, ok := provisioner.FindInstanceType(catalog, "g5.xlarge")
	if !ok || g5.GPUCount() != 1 || g5.GPUs[0].Type != "nvidia-a10g" || g5.GPUs[0].VRAMGB != 24 || len(g5.Offerings) != 6 || g5.Offerings[0].Zone != "eu-west-1a" {
		t.Errorf("g5.xlarge: %+v", g5)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}
