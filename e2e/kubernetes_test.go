package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/target/kube"
	"github.com/gantry-dev/gantry/target/kube/kubetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubeSpec is a Kubernetes cluster of the test API server and three
// services: web (spread over zones, a Secret, ports, a health check),
// trainer (a GPU) and enclave (TEE required). {{...}} vary.
const kubeSpec = `kind: Cluster
metadata: {name: k8s}
spec:
  provider:
    name: kubernetes
    config: {kubeconfig: "{{KUBECONFIG}}", namespace: "{{NS}}", runtimeClass: "{{KATA}}"}
---
kind: Service
metadata: {name: web}
spec:
  cluster: k8s
  image: "{{IMAGE}}"
  replicas: {{REPLICAS}}
  env:
    - {name: MODE, value: prod}
    - {name: DB_PASSWORD, secretRef: {name: db, key: password}}
  ports: [{name: http, containerPort: 8080}]
  resources: {cpu: 250m, memory: 128Mi}
  healthCheck: {http: {port: http, path: /healthz}}
  placement: {spread: [{key: zone, maxSkew: 1}]}
  update: {maxSurge: 1, maxUnavailable: 0, progressDeadlineSeconds: 20}
---
kind: Service
metadata: {name: trainer}
spec:
  cluster: k8s
  image: registry.test/trainer:1
  resources: {cpu: "1", memory: 1Gi, gpu: {count: 1, type: ` + kubetest.GPUProduct + `, minVramGB: 40}}
---
kind: Service
metadata: {name: enclave}
spec:
  cluster: k8s
  image: registry.test/enclave:1
  isolation: teeRequired
`

type kubeCase struct {
	env      *kubetest.Env
	ns, kata string
	s        *server
}

func (k *kubeCase) spec(t *testing.T, image string, replicas int) string {
	r := strings.NewReplacer("{{KUBECONFIG}}", k.env.Kubeconfig, "{{NS}}", k.ns, "{{KATA}}", k.kata, "{{IMAGE}}", image, "{{REPLICAS}}", fmt.Sprint(replicas))
	return writeFile(t, k.s.dataDir, "k8s.yaml", r.Replace(kubeSpec))
}

func (k *kubeCase) apply(t *testing.T, image string, replicas int) {
	t.Helper()
	if _, errOut, code := k.s.gantry("apply", "-f", k.spec(t, image, replicas)); code != 0 {
		t.Fatalf("apply: %s", errOut)
	}
}

// pods are the namespace's Pods of a service by name (being deleted or not).
func (k *kubeCase) pods(t *testing.T, service string) map[string]corev1.Pod {
	out := map[string]corev1.Pod{}
	for _, p := range k.env.Pods(t, k.ns) {
		if p.Labels[kube.LabelService] == service {
			out[p.Name] = p
		}
	}
	return out
}

// podsMatchReplicas: the service's live Pods are exactly its replicas',
// each of the replica's revision, and each replica is running there.
func (k *kubeCase) podsMatchReplicas(t *testing.T, service string, n int) (bool, string) {
	pods := k.pods(t, service)
	rs := k.s.replicas(service)
	if len(rs) != n || len(pods) != n {
		return false, fmt.Sprintf("%d replicas, %d Pods, want %d", len(rs), len(pods), n)
	}
	for _, r := range rs {
		p, ok := pods[r.ID]
		switch {
		case !ok:
			return false, "no Pod for " + r.ID
		case p.Labels[kube.LabelRevision] != r.SpecHash:
			return false, fmt.Sprintf("Pod %s of revision %s, replica of %s", p.Name, p.Labels[kube.LabelRevision], r.SpecHash)
		case r.State != api.ReplicaRunning || r.Node != p.Spec.NodeName:
			return false, fmt.Sprintf("replica %s %s on %q", r.ID, r.State, r.Node)
		}
	}
	return true, ""
}

// TestKubernetesTarget runs services as Pods on the test API server
// through the built gantry binary: placement policies, states, Secrets,
// a Service, deployments (a good one, a crashing one reverted), scaling,
// a server killed mid-way, and deletion.
func TestKubernetesTarget(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	env := kubetest.New(t)
	dir := t.TempDir()
	k := &kubeCase{env: env, ns: kubetest.Name("e2e"), kata: kubetest.Name("kata")}
	env.DeleteNamespaceAtEnd(t, k.ns)
	k.s = startServer(t, dir)
	if _, errOut, code := k.s.gantry("secret", "create", "db", "--from-literal", "password=pod-secret-value"); code != 0 {
		t.Fatalf("secret create: %s", errOut)
	}
	k.apply(t, "registry.test/web:1", 3)

	waitFor(t, "the cluster's KubernetesReady condition True", func() (bool, string) {
		cl, err := k.s.api.GetCluster(context.Background(), "k8s")
		if err != nil || cl.Status == nil {
			return false, fmt.Sprint(err)
		}
		i := slices.IndexFunc(cl.Status.Conditions, func(c api.Condition) bool { return c.Type == api.ConditionKubernetesReady })
		return i >= 0 && cl.Status.Conditions[i].Status == "True", fmt.Sprintf("%+v", cl.Status.Conditions)
	})
	waitFor(t, "web's 3 Pods running, spread over the zones", func() (bool, string) {
		if ok, why := k.podsMatchReplicas(t, "web", 3); !ok {
			return false, why
		}
		zones := map[string]int{}
		for _, p := range k.pods(t, "web") {
			zones[map[string]string{kubetest.NodeA: "a", kubetest.NodeGPU: "a", kubetest.NodeB: "b"}[p.Spec.NodeName]]++
		}
		return zones["a"] >= 1 && zones["b"] >= 1, fmt.Sprint("zones ", zones)
	})
	t.Run("get replicas shows each Pod's node", func(t *testing.T) {
		out, _, _ := k.s.gantry("get", "replicas", "--no-headers")
		for _, r := range k.s.replicas("web") {
			if !strings.Contains(out, r.ID) || !strings.Contains(out, r.Node) {
				t.Errorf("get replicas does not show %s on %s:\n%s", r.ID, r.Node, out)
			}
		}
	})
	t.Run("Secret by reference, Service selecting the Pods", func(t *testing.T) {
		pod := k.pods(t, "web")["web-0"]
		for _, e := range pod.Spec.Containers[0].Env {
			if e.Name == "DB_PASSWORD" && (e.Value != "" || e.ValueFrom.SecretKeyRef.Name != kube.SecretName("db")) {
				t.Errorf("DB_PASSWORD %+v", e)
			}
		}
		sec, err := env.Client.CoreV1().Secrets(k.ns).Get(context.Background(), kube.SecretName("db"), metav1.GetOptions{})
		if err != nil || string(sec.Data["password"]) != "pod-secret-value" {
			t.Errorf("Kubernetes Secret: %v", err)
		}
		svc, err := env.Client.CoreV1().Services(k.ns).Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil || svc.Spec.Selector[kube.LabelService] != "web" || svc.Spec.Ports[0].Port != 8080 {
			t.Errorf("Service web: %v %+v", err, svc)
		}
	})
	t.Run("endpoints are the Pods' addresses from the API server, under the Service's name", func(t *testing.T) {
		waitFor(t, "web's endpoints matching its Pods", func() (bool, string) {
			set, err := k.s.api.ServiceEndpoints(context.Background(), "web")
			if err != nil {
				return false, err.Error()
			}
			want := map[string]bool{}
			for _, p := range k.pods(t, "web") {
				if p.Status.PodIP != "" {
					want[p.Status.PodIP+":8080"] = true
				}
			}
			got := map[string]bool{}
			for _, e := range set.Endpoints {
				if e.Serving {
					got[fmt.Sprintf("%s:%d", e.Address, e.Ports["http"])] = true
				}
			}
			return set.Name == "web."+k.ns+".svc" && len(want) == 3 && maps.Equal(got, want), fmt.Sprintf("%s: %v, Pods %v", set.Name, got, want)
		})
	})
	t.Run("GPU required lands on the GPU node", func(t *testing.T) {
		waitFor(t, "trainer running on the GPU node", func() (bool, string) {
			rs := k.s.replicas("trainer")
			return len(rs) == 1 && rs[0].State == api.ReplicaRunning && rs[0].Node == kubetest.NodeGPU, fmt.Sprintf("%+v", rs)
		})
	})
	t.Run("an API server that refuses Gantry shows in the cluster's condition", func(t *testing.T) {
		denied := fmt.Sprintf("kind: Cluster\nmetadata: {name: denied}\nspec:\n  provider: {name: kubernetes, config: {kubeconfig: %q, context: nobody, namespace: %s}}\n",
			env.Kubeconfig, k.ns)
		k.s.apply(t, "denied.yaml", denied)
		waitFor(t, "KubernetesReady False, Forbidden", func() (bool, string) {
			cl, err := k.s.api.GetCluster(context.Background(), "denied")
			if err != nil || cl.Status == nil {
				return false, fmt.Sprint(err)
			}
			i := slices.IndexFunc(cl.Status.Conditions, func(c api.Condition) bool { return c.Type == api.ConditionKubernetesReady })
			return i >= 0 && cl.Status.Conditions[i].Status == "False" && cl.Status.Conditions[i].Reason == "Forbidden" &&
				strings.Contains(cl.Status.Conditions[i].Message, `User "nobody" cannot list resource "pods"`), fmt.Sprintf("%+v", cl.Status.Conditions)
		})
	})
	t.Run("gantry logs reads the Pod's log", func(t *testing.T) {
		out, errOut, code := k.s.gantry("logs", "trainer-0", "--tail", "1")
		if code != 0 || out != "second line\n" {
			t.Errorf("logs: exit %d, %q %s", code, out, errOut)
		}
	})
	t.Run("teeRequired waits for the RuntimeClass, then runs in it", func(t *testing.T) {
		waitFor(t, "enclave pending, prerequisite missing", func() (bool, string) {
			rs := k.s.replicas("enclave")
			return len(rs) == 1 && rs[0].State == api.ReplicaPending && strings.Contains(rs[0].Reason, "prerequisite missing"), fmt.Sprintf("%+v", rs)
		})
		if len(k.pods(t, "enclave")) != 0 {
			t.Fatal("a Pod was made for a teeRequired replica without the RuntimeClass")
		}
		env.RuntimeClass(t, k.kata)
		waitFor(t, "enclave running in "+k.kata, func() (bool, string) {
			p, ok := k.pods(t, "enclave")["enclave-0"]
			rs := k.s.replicas("enclave")
			return ok && p.Spec.RuntimeClassName != nil && *p.Spec.RuntimeClassName == k.kata && rs[0].State == api.ReplicaRunning, fmt.Sprintf("%+v", rs)
		})
	})
	t.Run("a deployment replaces the Pods revision by revision", func(t *testing.T) {
		// Sampled from the API server throughout: never more than 3+maxSurge
		// Pods, never fewer than 3-maxUnavailable ready.
		var mu sync.Mutex
		most, fewestReady, samples := 0, 3, 0
		stop := every(10*time.Millisecond, func() {
			live, ready := 0, 0
			for _, p := range k.pods(t, "web") {
				if p.DeletionTimestamp != nil {
					continue
				}
				live++
				if slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue }) {
					ready++
				}
			}
			mu.Lock()
			most, fewestReady, samples = max(most, live), min(fewestReady, ready), samples+1
			mu.Unlock()
		})
		k.apply(t, "registry.test/web:2", 3)
		out, errOut, code := k.s.gantry("rollout", "status", "web", "-w", "--timeout", "90s")
		stop()
		if code != 0 {
			t.Fatalf("rollout status: %s %s", out, errOut)
		}
		if most > 4 || fewestReady < 3 {
			t.Errorf("over %d samples: up to %d Pods (want ≤ 4), down to %d ready (want ≥ 3)", samples, most, fewestReady)
		}
		waitFor(t, "web's Pods all of revision 2", func() (bool, string) { return k.podsMatchReplicas(t, "web", 3) })
		for _, p := range k.pods(t, "web") {
			if p.Spec.Containers[0].Image != "registry.test/web:2" {
				t.Errorf("Pod %s runs %s", p.Name, p.Spec.Containers[0].Image)
			}
		}
	})
	t.Run("a crashing revision fails and is reverted", func(t *testing.T) {
		k.apply(t, "gantry.test/crash", 3)
		// kwok's Pods start (and crash) at once: the revert may be over
		// before a `rollout status` could start, so the history says it.
		waitFor(t, "the crashing revision failed and reverted", func() (bool, string) {
			ro, err := k.s.api.Rollout(context.Background(), "web")
			if err != nil || ro.Deployment == nil {
				return false, fmt.Sprint(err)
			}
			failed := slices.IndexFunc(ro.Revisions, func(r api.Revision) bool {
				return r.Spec.Image == "gantry.test/crash" && strings.Contains(r.Failed, "CrashLoopBackOff")
			})
			current := slices.IndexFunc(ro.Revisions, func(r api.Revision) bool { return r.Hash == ro.Deployment.Revision })
			return failed >= 0 && current >= 0 && ro.Revisions[current].Spec.Image == "registry.test/web:2" && ro.Deployment.State == api.DeployComplete,
				fmt.Sprintf("%+v", ro.Deployment)
		})
		waitFor(t, "web reverted to registry.test/web:2, crashing Pods gone", func() (bool, string) {
			if ok, why := k.podsMatchReplicas(t, "web", 3); !ok {
				return false, why
			}
			for _, p := range k.pods(t, "web") {
				if p.Spec.Containers[0].Image != "registry.test/web:2" {
					return false, p.Name + " runs " + p.Spec.Containers[0].Image
				}
			}
			return true, ""
		})
	})
	t.Run("scaling adds Pods", func(t *testing.T) {
		if _, errOut, code := k.s.gantry("scale", "service", "web", "--replicas", "5"); code != 0 {
			t.Fatal(errOut)
		}
		waitFor(t, "5 web Pods", func() (bool, string) { return k.podsMatchReplicas(t, "web", 5) })
	})
	// A server killed mid-way (its server is the test's: not a subtest).
	if _, errOut, code := k.s.gantry("scale", "service", "web", "--replicas", "2"); code != 0 {
		t.Fatal(errOut)
	}
	k.s.kill()
	if strings.Contains(k.s.log.String(), "pod-secret-value") { // read once the server is gone
		t.Error("the server logged the Secret's value")
	}
	// What a server that died before its Pod's replica was recorded
	// leaves behind.
	orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-99", Namespace: k.ns, Labels: map[string]string{
		kube.LabelCluster: "k8s", kube.LabelService: "web", kube.LabelReplica: "web-99", kube.LabelRevision: "old"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.test/web:0"}}}}
	if _, err := env.Client.CoreV1().Pods(k.ns).Create(context.Background(), orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k.s = startServer(t, dir)
	waitFor(t, "2 web Pods, the orphan gone", func() (bool, string) { return k.podsMatchReplicas(t, "web", 2) })
	names := []string{}
	for name := range k.pods(t, "web") {
		names = append(names, name)
	}
	sort.Strings(names)
	if slices.Contains(names, "web-99") {
		t.Errorf("orphan Pod kept: %v", names)
	}
	t.Run("deleting a service deletes its Pods and Service", func(t *testing.T) {
		if _, errOut, code := k.s.gantry("delete", "service", "web"); code != 0 {
			t.Fatal(errOut)
		}
		waitFor(t, "web's Pods and Service gone", func() (bool, string) {
			_, err := env.Client.CoreV1().Services(k.ns).Get(context.Background(), "web", metav1.GetOptions{})
			return len(k.pods(t, "web")) == 0 && err != nil, fmt.Sprintf("%d Pods, Service err %v", len(k.pods(t, "web")), err)
		})
	})
	t.Run("deleting the cluster with its services leaves nothing behind", func(t *testing.T) {
		// delete -f deletes the services, then the cluster, before a pass
		// has deleted their replicas: the retiring watch deletes the Pods
		// and the Secret.
		k.apply(t, "registry.test/web:2", 1)
		waitFor(t, "web's Pod back", func() (bool, string) { return k.podsMatchReplicas(t, "web", 1) })
		if _, errOut, code := k.s.gantry("delete", "-f", k.spec(t, "registry.test/web:2", 1)); code != 0 {
			t.Fatal(errOut)
		}
		waitFor(t, "no Pod or Secret of cluster k8s left", func() (bool, string) {
			pods := k.env.Pods(t, k.ns)
			live := slices.DeleteFunc(pods, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil || p.Labels[kube.LabelCluster] != "k8s" })
			_, err := env.Client.CoreV1().Secrets(k.ns).Get(context.Background(), kube.SecretName("db"), metav1.GetOptions{})
			return len(live) == 0 && err != nil, fmt.Sprintf("%d Pods, Secret err %v", len(live), err)
		})
	})
}
