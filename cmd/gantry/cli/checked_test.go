package cli

import (
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/spec"
)

const imageOnLocal = `kind: Cluster
metadata: {name: ctr}
spec:
  provider: {name: local}
  capacityGroups: [{groupId: g, instanceType: local.medium, minSize: 0, maxSize: 2}]
---
kind: Service
metadata: {name: web}
spec:
  cluster: ctr
  image: nginx:1.27
  replicas: 1
  resources: {cpu: 100m, memory: 64Mi}
`

// apply and validate leave an image on a local cluster to the server
// (whose --local-runtime may be docker); planned offline, local machines
// run processes, so the same spec is refused there.
func TestCheckedProvidersLeaveTheLocalRuntimeToTheServer(t *testing.T) {
	if _, err := spec.Parse("web.yaml", []byte(imageOnLocal), checkedProviders()); err != nil {
		t.Fatalf("apply's check refused an image on a local cluster: %v", err)
	}
	_, err := spec.Parse("web.yaml", []byte(imageOnLocal), describedProviders())
	if err == nil || !strings.Contains(err.Error(), `spec.image: cluster "ctr" runs no containers`) {
		t.Fatalf("an offline plan's check: %v", err)
	}
}
