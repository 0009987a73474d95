// Package kubetest gives tests the real Kubernetes API server that
// scripts/kube-up.sh starts (etcd, kube-apiserver, kube-scheduler, and
// kwok simulating the kubelets): a client, a namespace of their own, and
// the nodes every test shares. Without $GANTRY_TEST_KUBECONFIG the tests
// skip, except on CI, where that is a failure.
package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/target/kube/clientset"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Nodes every test may use: two plain nodes in zones a and b, and a GPU
// node in zone a with NVIDIA's feature-discovery labels.
const (
	NodeA   = "kwok-a"
	NodeB   = "kwok-b"
	NodeGPU = "kwok-gpu"
	// GPUProduct and GPUMemoryMiB are the GPU node's labels.
	GPUProduct   = "NVIDIA-A100-SXM4-80GB"
	GPUMemoryMiB = "81920"
)

// Env is the API server of the tests.
type Env struct {
	// Kubeconfig has two contexts: admin, and nobody (a user without any
	// role).
	Kubeconfig string
	// Server is the API server's URL.
	Server string
	Client clientset.Interface
}

// New returns the API server's environment, with the shared nodes
// present and Ready.
func New(t testing.TB) *Env {
	t.Helper()
	path := os.Getenv("GANTRY_TEST_KUBECONFIG")
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("GANTRY_TEST_KUBECONFIG is not set and CI=true: the Kubernetes-target tests must run on CI (scripts/kube-up.sh starts the API server)")
		}
		t.Skip("no Kubernetes API server: run scripts/kube-up.sh and export GANTRY_TEST_KUBECONFIG")
	}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
		&clientcmd.ConfigOverrides{CurrentContext: "admin"}).ClientConfig()
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", path, err)
	}
	rc.QPS, rc.Burst = 100, 200
	client, err := clientset.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{Kubeconfig: path, Server: rc.Host, Client: client}
	e.ensureNodes(t)
	return e
}

func (e *Env) ensureNodes(t testing.TB) {
	t.Helper()
	gpu := map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": GPUProduct, "nvidia.com/gpu.memory": GPUMemoryMiB}
	for _, n := range []struct {
		name, zone string
		labels     map[string]string
		gpus       int64
	}{{NodeA, "a", nil, 0}, {NodeB, "b", nil, 0}, {NodeGPU, "a", gpu, 4}} {
		labels := map[string]string{"kubernetes.io/hostname": n.name, "topology.kubernetes.io/zone": n.zone}
		for k, v := range n.labels {
			labels[k] = v
		}
		capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods: resource.MustParse("500"), corev1.ResourceEphemeralStorage: resource.MustParse("1Ti")}
		if n.gpus > 0 {
			capacity["nvidia.com/gpu"] = *resource.NewQuantity(n.gpus, resource.DecimalSI)
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: labels,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}}, Status: corev1.NodeStatus{Capacity: capacity}}
		_, err := e.Client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create node %s: %v", n.name, err)
		}
	}
	e.Eventually(t, 60*time.Second, "the shared nodes to be Ready (kwok marks them)", func() bool {
		for _, name := range []string{NodeA, NodeB, NodeGPU} {
			node, err := e.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil || !ready(node) {
				return false
			}
		}
		return true
	})
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WriteKubeconfig writes a kubeconfig for a server and bearer token (TLS
// unverified) in the test's directory.
func (e *Env) WriteKubeconfig(t testing.TB, server, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Name is a name no other test uses (namespaces, RuntimeClasses).
func Name(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// RuntimeClass creates a RuntimeClass for the test (deleted at its end).
func (e *Env) RuntimeClass(t testing.TB, name string) {
	t.Helper()
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: "kata"}
	if _, err := e.Client.NodeV1().RuntimeClasses().Create(context.Background(), rc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create RuntimeClass %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = e.Client.NodeV1().RuntimeClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// DeleteNamespaceAtEnd deletes a namespace's Pods and the namespace when
// the test ends (nothing else deletes namespaces here: there is no
// controller manager).
func (e *Env) DeleteNamespaceAtEnd(t testing.TB, ns string) {
	t.Cleanup(func() {
		ctx := context.Background()
		_ = e.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = e.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
}

// Pod reads a Pod, nil when it does not exist.
func (e *Env) Pod(t testing.TB, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := e.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get Pod %s/%s: %v", ns, name, err)
	}
	return p
}

// Pods lists a namespace's Pods.
func (e *Env) Pods(t testing.TB, ns string) []corev1.Pod {
	t.Helper()
	list, err := e.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list Pods of %s: %v", ns, err)
	}
	return list.Items
}

// Eventually waits for cond, failing the test after timeout. The API
// server and kwok work asynchronously: a test watches for what they do,
// it never sleeps a fixed time instead.
func (e *Env) Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
}
