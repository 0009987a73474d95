package spec

import (
	"regexp"
	"strconv"

	"github.com/gantry-dev/gantry/api"
)

// KubernetesSettings are a Kubernetes cluster's provider config: where its
// API server is, the namespace Gantry's Pods go in, and how policies map
// to what its nodes offer. Every field has a default (the names NVIDIA's
// GPU feature discovery and Kata Containers use).
type KubernetesSettings struct {
	// Kubeconfig is the kubeconfig file to use; empty means kubectl's
	// rules ($KUBECONFIG, then ~/.kube/config), then the in-cluster
	// configuration of a server that runs as a Pod.
	Kubeconfig string
	// Context in that file (default: its current context).
	Context string
	// Namespace of the Pods, Services and Secrets (created when missing).
	Namespace string
	// RuntimeClass isolates teeRequired and teePreferred replicas.
	RuntimeClass string
	// GPUResource is the extended resource a GPU replica requests.
	GPUResource string
	// GPUNodeLabel is "true" on GPU nodes; GPUProductLabel names their
	// GPU type, GPUMemoryLabel their VRAM in MiB.
	GPUNodeLabel    string
	GPUProductLabel string
	GPUMemoryLabel  string
	// GPUPreferredWeight is the weight (1–100) of the node affinity a
	// GPU-preferred replica has for GPU nodes.
	GPUPreferredWeight int32
}

// Defaults of KubernetesSettings.
const (
	DefaultKubernetesNamespace = "gantry"
	DefaultRuntimeClass        = "kata"
	DefaultGPUResource         = "nvidia.com/gpu"
	DefaultGPUNodeLabel        = "nvidia.com/gpu.present"
	DefaultGPUProductLabel     = "nvidia.com/gpu.product"
	DefaultGPUMemoryLabel      = "nvidia.com/gpu.memory"
	DefaultGPUPreferredWeight  = 50
)

var (
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$`)
	// qualifiedName is a label key or an extended resource name.
	qualifiedName = regexp.MustCompile(`^([a-z0-9]([a-z0-9.-]*[a-z0-9])?/)?[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)
)

// KubernetesConfig reads a Kubernetes cluster's provider config, with its
// defaults, naming the field of anything wrong.
func KubernetesConfig(p api.ProviderSpec) (KubernetesSettings, ErrorList) {
	s := KubernetesSettings{Namespace: DefaultKubernetesNamespace, RuntimeClass: DefaultRuntimeClass, GPUResource: DefaultGPUResource,
		GPUNodeLabel: DefaultGPUNodeLabel, GPUProductLabel: DefaultGPUProductLabel, GPUMemoryLabel: DefaultGPUMemoryLabel,
		GPUPreferredWeight: DefaultGPUPreferredWeight}
	var errs ErrorList
	str := func(key string, into *string, pattern *regexp.Regexp, want string) {
		v, ok := p.Config[key]
		if !ok {
			return
		}
		if v == "" || (pattern != nil && (len(v) > 253 || !pattern.MatchString(v))) {
			errs.add("spec.provider.config."+key, "%q is not %s", v, want)
			return
		}
		*into = v
	}
	str("kubeconfig", &s.Kubeconfig, nil, "a file")
	str("context", &s.Context, nil, "a context name")
	str("runtimeClass", &s.RuntimeClass, dnsSubdomain, "a RuntimeClass name")
	str("gpuResource", &s.GPUResource, qualifiedName, "a resource name")
	str("gpuNodeLabel", &s.GPUNodeLabel, qualifiedName, "a label key")
	str("gpuProductLabel", &s.GPUProductLabel, qualifiedName, "a label key")
	str("gpuMemoryLabel", &s.GPUMemoryLabel, qualifiedName, "a label key")
	if v, ok := p.Config["namespace"]; ok {
		if len(v) > 63 || !dnsLabel.MatchString(v) {
			errs.add("spec.provider.config.namespace", "%q is not a namespace name (a DNS label)", v)
		} else {
			s.Namespace = v
		}
	}
	if v, ok := p.Config["gpuPreferredWeight"]; ok {
		w, err := strconv.Atoi(v)
		if err != nil || w < 1 || w > 100 {
			errs.add("spec.provider.config.gpuPreferredWeight", "%q is not a weight from 1 to 100", v)
		} else {
			s.GPUPreferredWeight = int32(w)
		}
	}
	for _, k := range sortedStringKeys(p.Config) {
		if !kubernetesConfigKeys[k] {
			errs.add("spec.provider.config."+k, "unknown setting (known: context, gpuMemoryLabel, gpuNodeLabel, gpuPreferredWeight, gpuProductLabel, gpuResource, kubeconfig, namespace, runtimeClass)")
		}
	}
	if p.Region != "" {
		errs.add("spec.provider.region", "a kubernetes cluster has no region: its kubeconfig says where it is")
	}
	return s, errs
}

var kubernetesConfigKeys = map[string]bool{"kubeconfig": true, "context": true, "namespace": true, "runtimeClass": true,
	"gpuResource": true, "gpuNodeLabel": true, "gpuProductLabel": true, "gpuMemoryLabel": true, "gpuPreferredWeight": true}

// validateKubernetesCluster checks a cluster that targets Kubernetes: its
// settings, and nothing of the machine template (it has no machines).
func validateKubernetesCluster(c *api.Cluster) ErrorList {
	_, errs := KubernetesConfig(c.Spec.Provider)
	s := c.Spec
	if len(s.CapacityGroups) > 0 {
		errs.add("spec.capacityGroups", "a kubernetes cluster has no capacity groups: Kubernetes places its Pods on its own nodes")
	}
	machineOnly := []struct {
		field string
		set   bool
	}{{"spec.agent", s.Agent != nil}, {"spec.containerCidr", s.ContainerCIDR != ""}, {"spec.monitoring", s.Monitoring != nil},
		{"spec.systemReserved", s.SystemReserved != (api.ResourceAmounts{})}}
	for _, f := range machineOnly {
		if f.set {
			errs.add(f.field, "not used by a kubernetes cluster (it has no machines of Gantry's)")
		}
	}
	return errs
}

// validateServiceOnKubernetes checks what a service needs to run as Pods.
func validateServiceOnKubernetes(svc *api.Service) ErrorList {
	var errs ErrorList
	sp := svc.Spec
	if sp.Image == "" {
		errs.add("spec.image", "required on a kubernetes cluster (Pods run images, not host processes)")
	}
	if len(sp.Placement.CapacityGroups) > 0 {
		errs.add("spec.placement.capacityGroups", "a kubernetes cluster has no capacity groups")
	}
	if len(sp.Expose) > 0 {
		errs.add("spec.expose", "not on a kubernetes cluster: it has no Gantry edge machines (use the cluster's own Ingress or a LoadBalancer Service)")
	}
	for i, p := range sp.Ports {
		if len(p.Name) > 15 {
			errs.add(indexPath("spec.ports", i)+".name", "%q is longer than the 15 characters Kubernetes allows a port name", p.Name)
		}
		if p.ContainerPort == 0 {
			errs.add(indexPath("spec.ports", i)+".containerPort", "required on a kubernetes cluster (the Pod and its Service declare it)")
		}
	}
	return errs
}
