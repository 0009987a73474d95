package decide_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/decide"
	"github.com/gantry-dev/gantry/decide/decidetest"
	"github.com/gantry-dev/gantry/provisioner"
	"github.com/gantry-dev/gantry/replica"
)

// onKubernetes is a harness with cluster k8s, a Kubernetes target whose
// watch has listed the RuntimeClasses given.
func onKubernetes(t *testing.T, classes ...string) *decidetest.Harness {
	h := decidetest.New(t)
	h.Snap.Clusters["k8s"] = &api.Cluster{Kind: api.KindCluster, Metadata: api.ObjectMeta{Name: "k8s", Generation: 1},
		Spec: api.ClusterSpec{Provider: api.ProviderSpec{Name: api.ProviderKubernetes, Config: map[string]string{"namespace": "apps"}}}}
	obs := decide.KubernetesObservation{RuntimeClassesListed: true, RuntimeClasses: map[string]bool{}}
	for _, c := range classes {
		obs.RuntimeClasses[c] = true
	}
	h.Snap.Kubernetes = map[string]decide.KubernetesObservation{"k8s": obs}
	return h
}

func TestPodsArePlacedWithTheirIsolation(t *testing.T) {
	isolated := func(iso string) func(*api.ServiceSpec) {
		return func(s *api.ServiceSpec) { s.Image, s.Isolation = "app:1", iso }
	}
	t.Run("teeRequired without the RuntimeClass waits, no Pod", func(t *testing.T) {
		h := onKubernetes(t)
		h.Service("enclave", "k8s", 1, "100m", "64Mi", isolated(api.IsolationTEERequired))
		p := h.Pass()
		if len(p.Assignments) != 0 || !strings.Contains(p.Pending["enclave-0"], `prerequisite missing: cluster k8s has no RuntimeClass "kata"`) {
			t.Fatalf("assignments %+v pending %q", p.Assignments, p.Pending["enclave-0"])
		}
		h.Snap.Kubernetes["k8s"].RuntimeClasses["kata"] = true
		p = h.Pass()
		if len(p.Assignments) != 1 || !p.Assignments[0].Placement.TEE || p.Assignments[0].Placement.Pod != "apps/enclave-0" {
			t.Fatalf("with kata: assignments %+v", p.Assignments)
		}
		if r := h.ReplicaByID("enclave-0"); r.Pod != "apps/enclave-0" || r.RuntimeClass != "tee" || r.State != api.ReplicaAssigned {
			t.Errorf("replica %+v", r)
		}
	})
	t.Run("teePreferred without it runs standard, with a warning", func(t *testing.T) {
		h := onKubernetes(t)
		h.Service("web", "k8s", 1, "100m", "64Mi", isolated(api.IsolationTEEPreferred))
		p := h.Pass()
		if len(p.Assignments) != 1 || p.Assignments[0].Placement.TEE || !strings.Contains(p.Assignments[0].Placement.Note, "without TEE isolation") {
			t.Fatalf("assignments %+v", p.Assignments)
		}
	})
	t.Run("teePreferred when the RuntimeClasses cannot be listed", func(t *testing.T) {
		h := onKubernetes(t)
		h.Snap.Kubernetes["k8s"] = decide.KubernetesObservation{ListError: "forbidden: list RuntimeClasses"}
		h.Service("web", "k8s", 1, "100m", "64Mi", isolated(api.IsolationTEEPreferred))
		p := h.Pass()
		if len(p.Assignments) != 1 || !strings.Contains(p.Assignments[0].Placement.Note, "could not be listed (forbidden") {
			t.Fatalf("assignments %+v", p.Assignments)
		}
	})
	t.Run("standardRequired never gets the RuntimeClass", func(t *testing.T) {
		h := onKubernetes(t, "kata")
		h.Service("web", "k8s", 1, "100m", "64Mi", isolated(api.IsolationStandardRequired))
		if p := h.Pass(); len(p.Assignments) != 1 || p.Assignments[0].Placement.TEE {
			t.Fatalf("assignments %+v", p.Assignments)
		}
	})
}

func TestKubernetesReadyCondition(t *testing.T) {
	h := onKubernetes(t)
	key := decide.ConditionKey("k8s", api.ConditionKubernetesReady)
	h.Pass()
	if c := h.Memory.Conditions[key]; c.Status != "True" {
		t.Fatalf("condition %+v, want True", c)
	}
	obs := h.Snap.Kubernetes["k8s"]
	obs.ErrKind, obs.Error, obs.At = provisioner.KindForbidden, `pods is forbidden: User "gantry" cannot create resource "pods"`, h.Now
	h.Snap.Kubernetes["k8s"] = obs
	h.Pass()
	if c := h.Memory.Conditions[key]; c.Status != "False" || c.Reason != "Forbidden" || !strings.Contains(c.Message, "cannot create") {
		t.Fatalf("condition %+v, want False/Forbidden", c)
	}
	obs.ErrKind, obs.Error = "", ""
	h.Snap.Kubernetes["k8s"] = obs
	h.Pass()
	if c := h.Memory.Conditions[key]; c.Status != "True" {
		t.Fatalf("condition %+v, want True again", c)
	}
	var reasons []string
	for _, e := range h.Events {
		if e.Reason == api.ConditionKubernetesReady {
			reasons = append(reasons, e.Type)
		}
	}
	if strings.Join(reasons, ",") != "Warning,Normal" {
		t.Errorf("condition events %v, want a warning then a recovery", reasons)
	}
}

// TestPodDeploymentIsGatedOnReadiness: a new revision's Pod replaces an
// old one only once it runs and is ready, within maxSurge 1.
func TestPodDeploymentIsGatedOnReadiness(t *testing.T) {
	h := onKubernetes(t)
	h.Service("web", "k8s", 2, "100m", "64Mi", func(s *api.ServiceSpec) { s.Image = "app:1" })
	ready := func() {
		for _, r := range h.Snap.Replicas {
			if r.Pod != "" && r.State != api.ReplicaRunning {
				if _, err := replica.Observe(r, api.ReplicaStatus{ReplicaID: r.ID, State: api.ReplicaRunning, Node: "n1"}, "10.0.0.9", h.Now); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for i := 0; i < 5; i++ {
		h.Pass()
		ready()
		h.Step(time.Second)
	}
	if d := h.Memory.Deployments["web"]; d.State != api.DeployComplete {
		t.Fatalf("first deployment %+v", d)
	}
	svc := *h.Snap.Services[0]
	svc.Spec.Image, svc.Metadata.Generation = "app:2", 2
	h.Snap.Services[0] = &svc
	p := h.Pass()
	if len(p.CreateReplicas) != 1 || len(p.DeleteReplicas) != 0 {
		t.Fatalf("first step: create %d delete %d, want one new Pod and no old one gone", len(p.CreateReplicas), len(p.DeleteReplicas))
	}
	if p = h.Pass(); len(p.DeleteReplicas) != 0 {
		t.Fatalf("an old replica went before the new Pod was ready: %+v", p.DeleteReplicas)
	}
	for i := 0; i < 10 && h.Memory.Deployments["web"].State != api.DeployComplete; i++ {
		ready()
		h.Step(time.Second)
		h.Pass()
	}
	if d := h.Memory.Deployments["web"]; d.State != api.DeployComplete || d.Number != 2 {
		t.Fatalf("second deployment %+v", d)
	}
	for _, r := range h.Snap.Replicas {
		if r.Pod != "apps/"+r.ID {
			t.Errorf("replica %s placed as %q", r.ID, r.Pod)
		}
	}
}
