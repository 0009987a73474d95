package aws_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/provider/aws"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/provisioner/provisionertest"
)

// TestRealEC2 runs the contract suite against a real AWS account. Opt in
// with GANTRY_AWS_E2E=1; it launches (and terminates) real, billed
// instances. Credentials come from the SDK's default chain. Settings:
//
//	GANTRY_AWS_REGION       region (required)
//	GANTRY_AWS_CONFIG       spec.provider.config as k=v;k=v (imageId,
//	                        subnets, agentRuntime ...)
//	GANTRY_AWS_INSTANCE_TYPE the type to launch (default t3.micro)
func TestRealEC2(t *testing.T) {
	if os.Getenv("GANTRY_AWS_E2E") != "1" {
		t.Skip("set GANTRY_AWS_E2E=1 (and GANTRY_AWS_REGION, GANTRY_AWS_CONFIG) to run against a real AWS account")
	}
	region := os.Getenv("GANTRY_AWS_REGION")
	config := map[string]string{}
	for _, kv := range strings.Split(os.Getenv("GANTRY_AWS_CONFIG"), ";") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			config[k] = v
		}
	}
	instanceType := os.Getenv("GANTRY_AWS_INSTANCE_TYPE")
	if instanceType == "" {
		instanceType = "t3.micro"
	}
	provisionertest.RunWith(t, func(t *testing.T) provisioner.Provisioner {
		p, err := aws.New(context.Background(), aws.DefaultConfig(region))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}, provisionertest.Options{Timeout: 10 * time.Minute, Poll: 5 * time.Second, Spec: func(s *provisioner.LaunchSpec) {
		s.Region, s.Config, s.InstanceType, s.Zone = region, config, instanceType, ""
	}})
}
