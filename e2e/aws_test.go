package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/client"
	"github.com/gantry-dev/gantry/provider/aws/ec2fake"
)

// gantry plan prices examples/aws.yaml with the built-in EC2 catalog.
func TestPlanPricesTheAWSExample(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	out, errOut, code := runGantry(t, "plan", "-f", "../examples/aws.yaml", "--offline", "-o", "json")
	if code != 0 {
		t.Fatalf("plan aws: %s", errOut)
	}
	p := planJSON(t, out)
	if len(p.Pending) != 0 || len(p.Placements) != 8 {
		t.Fatalf("every replica must be placed: pending %v", p.Pending)
	}
	for _, m := range p.Add {
		if !strings.HasPrefix(m.Zone, "us-east-1") || m.PricePerHour <= 0 {
			t.Errorf("machine %+v: want a priced us-east-1 offering", m)
		}
		if m.Group == "gpu" && (m.InstanceType != "g5.xlarge" || m.CapacityType != "spot") {
			t.Errorf("gpu group: %+v", m)
		}
	}
}

// The real server drives EC2 (the fake, through the real SDK): machines
// are launched with cloud-init user data; a machine whose boot fails is
// replaced after the join timeout, with its last boot step and console
// tail in the event.
func TestAWSMachineThatNeverJoinsIsDiagnosed(t *testing.T) {
	fake := ec2fake.New()
	fake.Console = "Cloud-init v. 24.1 running\n[gantry-boot] start\n[gantry-boot] download\ncurl: (22) The requested URL returned error: 404\n[gantry-boot] failed: download https://downloads.example.com/gantry\n"
	endpoint := httptest.NewServer(fake)
	defer endpoint.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDGANTRYTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "gantry-test-secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent/gantry-test")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/gantry-test")
	s := startServer(t, t.TempDir(), "--aws-endpoint", endpoint.URL, "--join-timeout", "2s")
	s.apply(t, "aws.yaml", `kind: Cluster
metadata: {name: cloud}
spec:
  provider:
    name: aws
    region: us-east-1
    config:
      imageId: ami-0123456789abcdef0
  agent:
    binaries:
      amd64: {url: https://downloads.example.com/gantry, sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855}
  capacityGroups:
    - {groupId: general, instanceType: m6i.large, minSize: 1, maxSize: 2}
`)
	waitFor(t, "a machine replaced for not joining, with its boot diagnosis", func() (bool, string) {
		events, err := s.api.ListEvents(context.Background(), client.EventQuery{Kind: "Machine"})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range events {
			if strings.Contains(e.Message, "did not join") {
				ok := strings.Contains(e.Message, "last boot step: failed: download") && strings.Contains(e.Message, "404")
				return ok, e.Message
			}
		}
		return false, "no join timeout yet"
	})
	// The event is written when the replacement is decided; its launch
	// reaches EC2 a moment later, from the act step.
	waitFor(t, "the failed machine replaced through RunInstances", func() (bool, string) {
		calls := fake.Calls("RunInstances")
		return calls >= 2, fmt.Sprintf("RunInstances called %d times", calls)
	})
	form := fake.LastRequest("RunInstances")
	if form.Get("TagSpecification.1.ResourceType") != "instance" || form.Get("ImageId") != "ami-0123456789abcdef0" || form.Get("UserData") == "" {
		t.Errorf("RunInstances request: %v", form)
	}
	// The replacement may still be launching: its instance id comes with
	// RunInstances' answer.
	waitFor(t, "every machine launched through AWS", func() (bool, string) {
		for _, m := range s.machines() {
			if m.Provider != "aws" || m.ProviderKey != "aws:us-east-1" || !strings.HasPrefix(m.ProviderID, "i-") {
				return false, fmt.Sprintf("machine %s: provider %q, key %q, instance %q", m.ID, m.Provider, m.ProviderKey, m.ProviderID)
			}
		}
		return true, ""
	})
}
