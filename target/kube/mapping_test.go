package kube_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/target"
	"github.com/gantry-dev/gantry/target/kube"
	"github.com/gantry-dev/gantry/target/kube/kubetest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// harness runs the Kubernetes target against the test API server, in a
// namespace of its own, and records what its watch reports.
type harness struct {
	env      *kubetest.Env
	targets  *kube.Targets
	settings spec.KubernetesSettings
	cluster  string

	mu       sync.Mutex
	observed map[string]api.ReplicaStatus
}

func newHarness(t *testing.T, config map[string]string) *harness {
	env := kubetest.New(t)
	ns := kubetest.Name("gantry-test")
	cfg := map[string]string{"kubeconfig": env.Kubeconfig, "context": "admin", "namespace": ns}
	for k, v := range config {
		cfg[k] = v
	}
	settings, errs := spec.KubernetesConfig(api.ProviderSpec{Name: api.ProviderKubernetes, Config: cfg})
	if errs != nil {
		t.Fatal(errs)
	}
	h := &harness{env: env, settings: settings, cluster: kubetest.Name("c"), observed: map[string]api.ReplicaStatus{}}
	h.targets = kube.New(kube.DefaultConfig(), slog.New(slog.DiscardHandler), clock.RealClock{}, h.report, func() {})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.targets.Run(ctx) }()
	env.DeleteNamespaceAtEnd(t, ns)
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func (h *harness) report(_ string, obs []kube.Observed) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range obs {
		h.observed[o.Status.ReplicaID] = o.Status
	}
	return nil
}

func (h *harness) status(id string) api.ReplicaStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.observed[id]
}

// workload is replica 0 of a service, placed.
func (h *harness) workload(service string, sp api.ServiceSpec, tee bool) kube.Workload {
	r := api.Replica{ID: service + "-0", Service: service, Cluster: h.cluster, SpecHash: "rev1", Pod: h.settings.Namespace + "/" + service + "-0"}
	if tee {
		r.RuntimeClass = "tee"
	}
	if sp.Image == "" {
		sp.Image = "registry.test/app:1"
	}
	return kube.Workload{Cluster: h.cluster, Replica: r, Spec: sp}
}

func (h *harness) set(d kube.Desired) {
	d.Cluster, d.Settings = h.cluster, h.settings
	h.targets.Set([]kube.Desired{d})
}

// pod waits for a replica's Pod and reads it back from the API server.
func (h *harness) pod(t *testing.T, id string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	h.env.Eventually(t, 30*time.Second, "Pod "+id, func() bool {
		pod = h.env.Pod(t, h.settings.Namespace, id)
		return pod != nil
	})
	return pod
}

func (h *harness) waitState(t *testing.T, id string, state api.ReplicaState) api.ReplicaStatus {
	t.Helper()
	h.env.Eventually(t, 30*time.Second, "replica "+id+" "+string(state), func() bool { return h.status(id).State == state })
	return h.status(id)
}

// TestPodMapping applies one replica for each policy through the target's
// watch and reads its Pod back from the API server.
func TestPodMapping(t *testing.T) {
	h := newHarness(t, map[string]string{"gpuPreferredWeight": "70"})
	gpuReq := api.ServiceSpec{Resources: api.ServiceResources{CPU: "250m", Memory: "1Gi",
		GPU: &api.GPURequirement{Count: 2, Type: kubetest.GPUProduct, MinVRAMGB: 40, Policy: api.GPURequired}}}
	gpuPref := api.ServiceSpec{Resources: api.ServiceResources{CPU: "100m", GPU: &api.GPURequirement{Count: 1, MinVRAMGB: 16, Policy: api.GPUPreferred}}}
	plain := api.ServiceSpec{
		Resources: api.ServiceResources{CPU: "500m", Memory: "256Mi", EphemeralStorage: "1Gi"},
		Ports:     []api.Port{{Name: "http", ContainerPort: 8080}},
		Env:       map[string]string{"MODE": "prod"},
		SecretEnv: map[string]api.SecretKeyRef{"DB_PASSWORD": {Name: "db", Key: "password"}},
		HealthCheck: &api.HealthCheck{HTTP: &api.HTTPCheck{Path: "/healthz", Port: "http"}, IntervalSeconds: 7, TimeoutSeconds: 2,
			FailureThreshold: 4},
		Placement: api.Placement{NodeSelector: map[string]string{"topology.kubernetes.io/zone": "b"}, Priority: 1000,
			Spread: []api.SpreadRule{{Key: api.SpreadZone, MaxSkew: 1}}},
	}
	dedicated := api.ServiceSpec{Placement: api.Placement{Dedicated: true, SameZone: true}}
	h.set(kube.Desired{
		Workloads: []kube.Workload{h.workload("gpu", gpuReq, false), h.workload("pref", gpuPref, false), h.workload("web", plain, false),
			h.workload("solo", dedicated, false)},
		Services: map[string]api.ServiceSpec{"web": plain},
		Secrets:  map[string]map[string]string{"db": {"password": "s3cret-value"}},
	})

	t.Run("resources", func(t *testing.T) {
		c := h.pod(t, "web-0").Spec.Containers[0]
		wantQ(t, "cpu request", c.Resources.Requests[corev1.ResourceCPU], "500m")
		wantQ(t, "memory request", c.Resources.Requests[corev1.ResourceMemory], "256Mi")
		wantQ(t, "memory limit", c.Resources.Limits[corev1.ResourceMemory], "256Mi")
		wantQ(t, "ephemeral-storage request", c.Resources.Requests[corev1.ResourceEphemeralStorage], "1Gi")
		if _, limited := c.Resources.Limits[corev1.ResourceCPU]; limited {
			t.Error("CPU has a limit; want a request only")
		}
	})
	t.Run("GPU required", func(t *testing.T) {
		pod := h.pod(t, "gpu-0")
		c := pod.Spec.Containers[0]
		wantQ(t, "GPU request", c.Resources.Requests["nvidia.com/gpu"], "2")
		wantQ(t, "GPU limit", c.Resources.Limits["nvidia.com/gpu"], "2")
		if pod.Spec.NodeSelector["nvidia.com/gpu.present"] != "true" {
			t.Errorf("node selector %v: want nvidia.com/gpu.present=true", pod.Spec.NodeSelector)
		}
		terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions
		want := []corev1.NodeSelectorRequirement{
			{Key: "nvidia.com/gpu.product", Operator: corev1.NodeSelectorOpIn, Values: []string{kubetest.GPUProduct}},
			{Key: "nvidia.com/gpu.memory", Operator: corev1.NodeSelectorOpGt, Values: []string{"40959"}},
		}
		if !slices.EqualFunc(terms, want, reqEqual) {
			t.Errorf("required node affinity %v, want %v", terms, want)
		}
		h.env.Eventually(t, 30*time.Second, "the GPU Pod on the GPU node", func() bool {
			return h.env.Pod(t, h.settings.Namespace, "gpu-0").Spec.NodeName == kubetest.NodeGPU
		})
	})
	t.Run("GPU preferred", func(t *testing.T) {
		pod := h.pod(t, "pref-0")
		if _, ok := pod.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]; ok {
			t.Error("a GPU-preferred replica has a GPU limit")
		}
		pref := pod.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		if len(pref) != 1 || pref[0].Weight != 70 || pref[0].Preference.MatchExpressions[0].Key != "nvidia.com/gpu.present" {
			t.Errorf("preferred node affinity %+v: want weight 70 for nvidia.com/gpu.present", pref)
		}
	})
	t.Run("spread, node selector, priority", func(t *testing.T) {
		pod := h.pod(t, "web-0")
		tsc := pod.Spec.TopologySpreadConstraints
		if len(tsc) != 1 || tsc[0].TopologyKey != "topology.kubernetes.io/zone" || tsc[0].MaxSkew != 1 ||
			tsc[0].WhenUnsatisfiable != corev1.DoNotSchedule || tsc[0].LabelSelector.MatchLabels[kube.LabelService] != "web" {
			t.Errorf("topology spread constraints %+v", tsc)
		}
		if pod.Spec.NodeSelector["topology.kubernetes.io/zone"] != "b" {
			t.Errorf("node selector %v", pod.Spec.NodeSelector)
		}
		// The API server's Priority admission resolved the class.
		if pod.Spec.PriorityClassName != "gantry-priority-1000" || pod.Spec.Priority == nil || *pod.Spec.Priority != 1000 {
			t.Errorf("priority class %q priority %v: want gantry-priority-1000 = 1000", pod.Spec.PriorityClassName, pod.Spec.Priority)
		}
		h.env.Eventually(t, 30*time.Second, "web-0 on the zone-b node", func() bool {
			return h.env.Pod(t, h.settings.Namespace, "web-0").Spec.NodeName == kubetest.NodeB
		})
	})
	t.Run("dedicated and same zone", func(t *testing.T) {
		aff := h.pod(t, "solo-0").Spec.Affinity
		anti := aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		if len(anti) != 1 || anti[0].TopologyKey != "kubernetes.io/hostname" || anti[0].LabelSelector.MatchExpressions[1].Values[0] != "solo" {
			t.Errorf("pod anti-affinity %+v: want other services' Pods kept off the node", anti)
		}
		same := aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		if len(same) != 1 || same[0].TopologyKey != "topology.kubernetes.io/zone" || same[0].LabelSelector.MatchLabels[kube.LabelService] != "solo" {
			t.Errorf("pod affinity %+v: want the service's Pods in one zone", same)
		}
	})
	t.Run("health check as probes", func(t *testing.T) {
		c := h.pod(t, "web-0").Spec.Containers[0]
		for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.IntValue() != 8080 ||
				p.PeriodSeconds != 7 || p.TimeoutSeconds != 2 || p.FailureThreshold != 4 {
				t.Errorf("%s probe %+v", name, p)
			}
		}
	})
	t.Run("ports and Service", func(t *testing.T) {
		c := h.pod(t, "web-0").Spec.Containers[0]
		if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8080 {
			t.Errorf("container ports %+v", c.Ports)
		}
		var svc *corev1.Service
		h.env.Eventually(t, 30*time.Second, "Service web", func() bool {
			s, err := h.env.Client.CoreV1().Services(h.settings.Namespace).Get(context.Background(), "web", metav1.GetOptions{})
			svc = s
			return err == nil
		})
		if svc.Spec.Selector[kube.LabelService] != "web" || svc.Spec.Selector[kube.LabelCluster] != h.cluster ||
			len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 {
			t.Errorf("Service %+v", svc.Spec)
		}
	})
	t.Run("env and Secrets", func(t *testing.T) {
		pod := h.pod(t, "web-0")
		env := map[string]corev1.EnvVar{}
		for _, e := range pod.Spec.Containers[0].Env {
			env[e.Name] = e
		}
		if env["MODE"].Value != "prod" || env["PORT"].Value != "8080" || env["GANTRY_REPLICA"].Value != "web-0" {
			t.Errorf("env %+v", env)
		}
		ref := env["DB_PASSWORD"]
		if ref.Value != "" || ref.ValueFrom == nil || ref.ValueFrom.SecretKeyRef.Name != "gantry-db" || ref.ValueFrom.SecretKeyRef.Key != "password" {
			t.Errorf("DB_PASSWORD %+v: want a reference to Secret gantry-db", ref)
		}
		if raw, _ := pod.Marshal(); strings.Contains(string(raw), "s3cret-value") {
			t.Error("the Secret's value is in the Pod's spec")
		}
		sec, err := h.env.Client.CoreV1().Secrets(h.settings.Namespace).Get(context.Background(), "gantry-db", metav1.GetOptions{})
		if err != nil || string(sec.Data["password"]) != "s3cret-value" {
			t.Errorf("Secret gantry-db: %v %v", err, sec)
		}
	})
	t.Run("states from the pod watch", func(t *testing.T) {
		st := h.waitState(t, "web-0", api.ReplicaRunning)
		if st.Health != api.HealthHealthy || st.Node != kubetest.NodeB {
			t.Errorf("web-0 %+v: want healthy on %s", st, kubetest.NodeB)
		}
	})
}

// TestTEE: teeRequired gets the configured RuntimeClass; standard never.
func TestTEE(t *testing.T) {
	class := kubetest.Name("kata")
	h := newHarness(t, map[string]string{"runtimeClass": class})
	h.set(kube.Desired{})
	h.env.RuntimeClass(t, class)
	h.env.Eventually(t, 30*time.Second, "RuntimeClass "+class+" observed", func() bool {
		return h.targets.Observations()[h.cluster].RuntimeClasses[class]
	})
	tee := api.ServiceSpec{Isolation: api.IsolationTEERequired}
	std := api.ServiceSpec{Isolation: api.IsolationStandardRequired}
	h.set(kube.Desired{Workloads: []kube.Workload{h.workload("tee", tee, true), h.workload("std", std, false)}})
	if got := h.pod(t, "tee-0").Spec.RuntimeClassName; got == nil || *got != class {
		t.Errorf("teeRequired Pod runtimeClassName %v, want %s", got, class)
	}
	if got := h.pod(t, "std-0").Spec.RuntimeClassName; got != nil {
		t.Errorf("standardRequired Pod runtimeClassName %q, want none", *got)
	}
}

// TestPendingReasonAndCrash: an unschedulable Pod's replica is pending
// with the scheduler's reason; a crashing one is crashed with restarts.
func TestPendingReasonAndCrash(t *testing.T) {
	h := newHarness(t, nil)
	huge := api.ServiceSpec{Resources: api.ServiceResources{GPU: &api.GPURequirement{Count: 1, Type: "NVIDIA-H200", Policy: api.GPURequired}}}
	crash := api.ServiceSpec{Image: "gantry.test/crash"}
	h.set(kube.Desired{Workloads: []kube.Workload{h.workload("huge", huge, false), h.workload("crash", crash, false)}})
	st := h.waitState(t, "huge-0", api.ReplicaPending)
	h.env.Eventually(t, 30*time.Second, "the scheduler's reason", func() bool {
		return strings.Contains(h.status("huge-0").Message, "nodes are available")
	})
	_ = st
	st = h.waitState(t, "crash-0", api.ReplicaCrashed)
	if st.Restarts == 0 || !strings.Contains(st.Message, "CrashLoopBackOff") {
		t.Errorf("crash-0 %+v: want restarts and CrashLoopBackOff", st)
	}
}

// TestOrphansAndRecreation: a Pod no replica wants goes; a replica's Pod
// deleted behind Gantry's back comes back; a Pod already gone is no error.
func TestOrphansAndRecreation(t *testing.T) {
	h := newHarness(t, nil)
	a, b := h.workload("a", api.ServiceSpec{}, false), h.workload("b", api.ServiceSpec{}, false)
	h.set(kube.Desired{Workloads: []kube.Workload{a, b}})
	h.pod(t, "a-0")
	h.pod(t, "b-0")
	h.set(kube.Desired{Workloads: []kube.Workload{a}})
	h.env.Eventually(t, 30*time.Second, "orphan b-0 deleted", func() bool { return h.env.Pod(t, h.settings.Namespace, "b-0") == nil })
	uid := h.pod(t, "a-0").UID
	if err := h.env.Client.CoreV1().Pods(h.settings.Namespace).Delete(context.Background(), "a-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.env.Eventually(t, 30*time.Second, "a-0 recreated", func() bool {
		p := h.env.Pod(t, h.settings.Namespace, "a-0")
		return p != nil && p.UID != uid
	})
	if obs := h.targets.Observations()[h.cluster]; obs.Error != "" {
		t.Errorf("condition error %q after deletions", obs.Error)
	}
}

// TestAPIErrorsAreTyped: a user the API server knows but allows nothing
// is forbidden; an unknown token is unauthorized; no server is transport.
func TestAPIErrorsAreTyped(t *testing.T) {
	env := kubetest.New(t)
	for _, tc := range []struct {
		name   string
		config map[string]string
		kind   string
	}{
		{"forbidden", map[string]string{"kubeconfig": env.Kubeconfig, "context": "nobody"}, "forbidden"},
		{"unauthorized", map[string]string{"kubeconfig": env.WriteKubeconfig(t, env.Server, "not-a-token")}, "auth"},
		{"unreachable", map[string]string{"kubeconfig": env.WriteKubeconfig(t, "https://127.0.0.1:1", "not-a-token")}, "transport"},
		{"missing kubeconfig", map[string]string{"kubeconfig": "/nonexistent/kubeconfig"}, "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			settings, errs := spec.KubernetesConfig(api.ProviderSpec{Name: api.ProviderKubernetes, Config: tc.config})
			if errs != nil {
				t.Fatal(errs)
			}
			targets := kube.New(kube.DefaultConfig(), slog.New(slog.DiscardHandler), clock.RealClock{}, func(string, []kube.Observed) error { return nil }, func() {})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); targets.Run(ctx) }()
			defer func() { cancel(); <-done }()
			var obs target.KubernetesObservation
			targets.Set([]kube.Desired{{Cluster: "c", Settings: settings}})
			env.Eventually(t, 30*time.Second, tc.kind+" error observed", func() bool {
				obs = targets.Observations()["c"]
				return string(obs.ErrKind) == tc.kind
			})
			if obs.Error == "" {
				t.Error("no message")
			}
		})
	}
}

func wantQ(t *testing.T, what string, got resource.Quantity, want string) {
	t.Helper()
	if got.Cmp(resource.MustParse(want)) != 0 {
		t.Errorf("%s = %s, want %s", what, got.String(), want)
	}
}

func reqEqual(a, b corev1.NodeSelectorRequirement) bool {
	return a.Key == b.Key && a.Operator == b.Operator && slices.Equal(a.Values, b.Values)
}
