package kube_test

import (
	"testing"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/spec"
	"github.com/gantry-dev/gantry/target/kube"
)

// Affinity terms become pod (anti-)affinity over the cluster's Gantry
// Pods with the selected labels, and a Pod carries its service's labels.
func TestAffinityTermsBecomePodAffinity(t *testing.T) {
	settings, errs := spec.KubernetesConfig(api.ProviderSpec{Name: api.ProviderKubernetes, Config: map[string]string{"namespace": "apps"}})
	if errs != nil {
		t.Fatal(errs)
	}
	sp := api.ServiceSpec{Image: "app:1", Placement: api.Placement{
		Affinity:     []api.AffinityTerm{{Selector: map[string]string{"app": "cache"}, Topology: api.SpreadZone, Mode: api.AffinityRequired}},
		AntiAffinity: []api.AffinityTerm{{Selector: map[string]string{"app": "db"}, Topology: api.SpreadMachine, Mode: api.AffinityPreferred, Weight: 30}},
	}}
	w := kube.Workload{Cluster: "k8s", Replica: api.Replica{ID: "api-0", Service: "api", SpecHash: "r1"}, Spec: sp,
		Labels: map[string]string{"app": "api", "gantry.dev/service": "spoofed"}}
	pod := kube.Pod(w, settings)
	if pod.Labels["app"] != "api" || pod.Labels["gantry.dev/service"] != "api" {
		t.Fatalf("labels %v: the service's, with Gantry's own winning", pod.Labels)
	}
	aff := pod.Spec.Affinity
	if aff == nil || aff.PodAffinity == nil || aff.PodAntiAffinity == nil {
		t.Fatalf("affinity %+v", aff)
	}
	req := aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if len(req) != 1 || *req[0].TopologyKey != "topology.kubernetes.io/zone" ||
		req[0].LabelSelector.MatchLabels["app"] != "cache" || req[0].LabelSelector.MatchLabels["gantry.dev/cluster"] != "k8s" {
		t.Fatalf("required pod affinity %+v", req)
	}
	pref := aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	if len(pref) != 1 || *pref[0].Weight != 30 || *pref[0].PodAffinityTerm.TopologyKey != "kubernetes.io/hostname" ||
		pref[0].PodAffinityTerm.LabelSelector.MatchLabels["app"] != "db" {
		t.Fatalf("preferred pod anti-affinity %+v", pref)
	}
}
