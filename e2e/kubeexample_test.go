package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/target/kube"
	"github.com/gantry-dev/gantry/target/kube/kubetest"
)

// The README's local recipe for the Kubernetes section:
// `gantry dev -f examples/kubernetes-local.yaml` against the control plane
// scripts/kube-up.sh starts runs the example's 3 replicas as Pods. The
// example names the script's default kubeconfig and the default namespace;
// the test points it at this run's API server and a namespace of its own
// (tests share the API server), and changes nothing else.
func TestDevRunsTheKubernetesLocalExample(t *testing.T) {
	t.Parallel() // see parallelTests in helpers_test.go
	env := kubetest.New(t)
	ns := kubetest.Name("example")
	env.DeleteNamespaceAtEnd(t, ns)
	example, err := os.ReadFile("../examples/kubernetes-local.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const kubeconfig, namespace = "kubeconfig: /tmp/gantry-kube/admin.kubeconfig", "namespace: default"
	for _, s := range []string{kubeconfig, namespace} {
		if !strings.Contains(string(example), s) {
			t.Fatalf("examples/kubernetes-local.yaml no longer says %q (the README's recipe and this test rely on it)", s)
		}
	}
	spec := strings.NewReplacer(kubeconfig, "kubeconfig: "+env.Kubeconfig, namespace, "namespace: "+ns).Replace(string(example))
	dir := t.TempDir()
	lines := runDev(t, filepath.Join(dir, "state"), writeFile(t, dir, "kubernetes-local.yaml", spec))

	nodeOf := readyTable(t, lines, "hello-k8s-", 3)
	pods := map[string]string{}
	env.Eventually(t, waitLimit, "the example's 3 Pods", func() bool {
		clear(pods)
		for _, p := range env.Pods(t, ns) {
			if p.Labels[kube.LabelService] == "hello-k8s" && p.DeletionTimestamp == nil {
				pods[p.Name] = p.Spec.NodeName
			}
		}
		return len(pods) == 3
	})
	for replica, node := range nodeOf {
		if pods[replica] == "" || pods[replica] != node {
			t.Errorf("replica %s runs on %q by gantry dev, its Pod on %q (Pods: %v)", replica, node, pods[replica], pods)
		}
	}
}

// readyTable reads `gantry dev` output up to its "All replicas are
// running" table and returns the MACHINE of each of its n rows whose
// replica starts with prefix.
func readyTable(t *testing.T, lines <-chan string, prefix string, n int) map[string]string {
	t.Helper()
	var transcript strings.Builder
	deadline := time.After(waitLimit)
	machineOf := map[string]string{}
	for ready := false; len(machineOf) < n; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("gantry dev exited early:\n%s", transcript.String())
			}
			transcript.WriteString(line + "\n")
			ready = ready || strings.HasPrefix(line, "All replicas are running")
			if fields := strings.Fields(line); ready && len(fields) >= 2 && strings.HasPrefix(fields[0], prefix) {
				machineOf[fields[0]] = fields[1]
			}
		case <-deadline:
			t.Fatalf("the replicas are not running after %s:\n%s", waitLimit, transcript.String())
		}
	}
	go func() {
		for range lines { // keep dev's stdout drained
		}
	}()
	return machineOf
}
