package gcp_test

import (
	"context"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/provider/gcp"
	"github.com/gantry-dev/gantry/provider/gcp/gcefake"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/provisionertest"
)

var settings = map[string]string{
	"project": "gantry-test", "image": "projects/debian-cloud/global/images/family/debian-12",
}

func newFake(t *testing.T) (*gcefake.Server, string) {
	fake := gcefake.New()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return fake, srv.URL
}

func newProvider(t *testing.T, endpoint string) *gcp.Provider {
	t.Helper()
	// No credentials anywhere: the fake needs none, and nothing may look.
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/gantry-test")
	p, err := gcp.New(context.Background(), gcp.Config{Project: "gantry-test", Region: "us-central1", Endpoint: endpoint + "/", NoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func withSettings(s *provisioner.LaunchSpec) { s.Config, s.Region = settings, "us-central1" }

func TestContract(t *testing.T) {
	provisionertest.RunWith(t, func(t *testing.T) provisioner.Provisioner {
		fake, url := newFake(t)
		fake.PageSize = 2
		return newProvider(t, url)
	}, provisionertest.Options{Timeout: 20 * time.Second, Poll: 10 * time.Millisecond, Spec: withSettings})
}

func launchSpec(key string) provisioner.LaunchSpec {
	s := provisioner.LaunchSpec{InstanceType: "g2-standard-4", Zone: "us-central1-b", CapacityType: "spot", IdempotencyKey: key,
		Tags: map[string]string{provisioner.TagManagedBy: provisioner.ManagedByValue, provisioner.TagMachine: "prod-gpu-1", "Team": "ML/Infra"},
		Bootstrap: provisioner.Bootstrap{ServerURL: "https://gantry.internal:7400", Cluster: "prod", Group: "gpu", MachineID: "prod-gpu-1", JoinToken: "gjt1.secret",
			AgentBinaries: map[string]api.AgentBinary{"amd64": {URL: "https://downloads.example.com/gantry-amd64", SHA256: strings.Repeat("a", 64)}}}}
	withSettings(&s)
	return s
}

func TestInsertRequest(t *testing.T) {
	fake, url := newFake(t)
	p := newProvider(t, url)
	inst, err := p.Launch(context.Background(), launchSpec("lk-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(inst.ID, "us-central1-b/gantry-") || inst.State != provisioner.StatePending || inst.CapacityType != "spot" {
		t.Fatalf("instance %+v", inst)
	}
	in, ok := fake.Instance(inst.ID)
	if !ok {
		t.Fatal("not in the fake")
	}
	if in.GetLabels()["gantry_dev_machine"] != "prod-gpu-1" || in.GetLabels()["team"] != "ml_infra" {
		t.Errorf("labels not sanitized to GCE rules: %v", in.GetLabels())
	}
	meta := map[string]string{}
	for _, item := range in.GetMetadata().GetItems() {
		meta[item.GetKey()] = item.GetValue()
	}
	if !strings.HasPrefix(meta["user-data"], "#cloud-config") || !strings.Contains(meta["gantry-tags"], `"Team":"ML/Infra"`) {
		t.Errorf("metadata %v", meta)
	}
	if in.GetScheduling().GetProvisioningModel() != "SPOT" || in.GetDisks()[0].GetInitializeParams().GetSourceImage() != settings["image"] {
		t.Errorf("scheduling %v disks %v", in.GetScheduling(), in.GetDisks())
	}
	if !strings.HasSuffix(in.GetMachineType(), "zones/us-central1-b/machineTypes/g2-standard-4") {
		t.Errorf("machine type %q", in.GetMachineType())
	}
	// Exact tags come back, although labels lost case and slashes.
	got, err := p.List(context.Background(), provisioner.Filter{Tags: map[string]string{"Team": "ML/Infra"}})
	if err != nil || len(got) != 1 || got[0].Tags["Team"] != "ML/Infra" {
		t.Fatalf("list by exact tag: %v %v", got, err)
	}
	if other, _ := p.List(context.Background(), provisioner.Filter{Tags: map[string]string{"Team": "ml_infra"}}); len(other) != 0 {
		t.Errorf("a tag matching only after sanitizing was listed: %v", other)
	}
	again, err := p.Launch(context.Background(), launchSpec("lk-1"))
	if err != nil || again.ID != inst.ID {
		t.Fatalf("retried launch: %v %v", again, err)
	}
}

func TestErrorsAreTyped(t *testing.T) {
	fake, url := newFake(t)
	p := newProvider(t, url)
	fake.FailInsert("ZONE_RESOURCE_POOL_EXHAUSTED")
	if _, err := p.Launch(context.Background(), launchSpec("lk-full")); provisioner.KindOf(err) != provisioner.KindInsufficientCapacity {
		t.Errorf("exhausted zone: %v", err)
	}
	fake.FailHTTP("POST", 403)
	if _, err := p.Launch(context.Background(), launchSpec("lk-403")); provisioner.KindOf(err) != provisioner.KindAuth {
		t.Errorf("403: %v", err)
	}
	bad := launchSpec("lk-bad")
	bad.Config = map[string]string{"project": "x"}
	if _, err := p.Launch(context.Background(), bad); provisioner.KindOf(err) != provisioner.KindInvalid || !strings.Contains(err.Error(), "spec.provider.config.image") {
		t.Errorf("missing image: %v", err)
	}
}

func TestStatesAndConsole(t *testing.T) {
	fake, url := newFake(t)
	fake.Console = "[gantry-boot] verify\n"
	p := newProvider(t, url)
	inst, err := p.Launch(context.Background(), launchSpec("lk-s"))
	if err != nil {
		t.Fatal(err)
	}
	var seen []provisioner.State
	for i := 0; i < 4; i++ {
		got, _ := p.Describe(context.Background(), inst.ID)
		seen = append(seen, got.State)
	}
	if seen[len(seen)-1] != provisioner.StateRunning {
		t.Fatalf("PROVISIONING/STAGING → RUNNING: %v", seen)
	}
	if out, err := p.ConsoleOutput(context.Background(), inst.ID); err != nil || out != "[gantry-boot] verify\n" {
		t.Errorf("console %q %v", out, err)
	}
	if err := p.Stop(context.Background(), inst.ID); err != nil {
		t.Fatal(err)
	}
	got, _ := p.Describe(context.Background(), inst.ID)
	if got.State != provisioner.StateStopping {
		t.Errorf("STOPPING → %s", got.State)
	}
	got, _ = p.Describe(context.Background(), inst.ID)
	if got.State != provisioner.StateStopped {
		t.Errorf("TERMINATED (GCE's stopped) → %s", got.State)
	}
}

func TestSettingsNameTheBadKey(t *testing.T) {
	for want, cfg := range map[string]map[string]string{
		"spec.provider.config.project: required": {"image": "i"},
		"spec.provider.config.image: required":   {"project": "p"},
		"spec.provider.config.zone: unknown":     {"project": "p", "image": "i", "zone": "x"},
		"spec.provider.config.diskSizeGb":        {"project": "p", "image": "i", "diskSizeGb": "5"},
	} {
		if _, err := gcp.ParseSettings(cfg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q, got %v", want, err)
		}
	}
}

// TestRealComputeEngine runs the contract against a real project. Opt in
// with GANTRY_GCP_E2E=1; it creates (and deletes) billed instances with
// Application Default Credentials. GANTRY_GCP_PROJECT, GANTRY_GCP_REGION
// and GANTRY_GCP_CONFIG (k=v;k=v: image, network, ...) configure it.
func TestRealComputeEngine(t *testing.T) {
	if os.Getenv("GANTRY_GCP_E2E") != "1" {
		t.Skip("set GANTRY_GCP_E2E=1 (and GANTRY_GCP_PROJECT, GANTRY_GCP_REGION, GANTRY_GCP_CONFIG) to run against a real project")
	}
	config := map[string]string{}
	for _, kv := range strings.Split(os.Getenv("GANTRY_GCP_CONFIG"), ";") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			config[k] = v
		}
	}
	config["project"] = os.Getenv("GANTRY_GCP_PROJECT")
	provisionertest.RunWith(t, func(t *testing.T) provisioner.Provisioner {
		p, err := gcp.New(context.Background(), gcp.Config{Project: config["project"], Region: os.Getenv("GANTRY_GCP_REGION")})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}, provisionertest.Options{Timeout: 10 * time.Minute, Poll: 5 * time.Second, Spec: func(s *provisioner.LaunchSpec) {
		s.Config, s.InstanceType, s.Zone = config, "e2-standard-2", ""
	}})
}
