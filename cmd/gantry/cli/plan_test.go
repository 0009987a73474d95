package cli

import (
	"os"
	"testing"

	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/spec"
)

// An offline plan of a file with a Secret and a failover group plans the
// group's two services, one machine in each cluster.
func TestOfflinePlanOfAFailoverGroup(t *testing.T) {
	data, err := os.ReadFile("../../../examples/postgres-failover.yaml")
	if err != nil {
		t.Fatal(err)
	}
	providers := describedProviders()
	docs, err := spec.Parse("postgres-failover.yaml", data, providers)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := offlinePlan(decide.DefaultConfig(), providers, "", docs)
	if err != nil {
		t.Fatal(err)
	}
	placed := map[string]bool{}
	for _, p := range plan.Placements {
		placed[p.Replica] = true
	}
	if len(plan.Add) != 2 || !placed["pg-east-0"] || !placed["pg-west-0"] {
		t.Fatalf("want one machine per side with its member: %+v", plan)
	}
}
