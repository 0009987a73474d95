// Package kube is the Kubernetes target: a Gantry cluster whose replicas
// run as Pods in an existing Kubernetes cluster. It maps a replica and
// its revision's spec to a Pod (and a service's ports to a Service, its
// Secrets to Kubernetes Secrets) as pure functions, and runs one watch
// per cluster in the leading server that applies them with server-side
// apply (field manager "gantry"), deletes what no replica wants, and
// reports each Pod's state as its replica's.
package kube

import (
	"maps"
	"slices"
	"strconv"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/runtime"
	"github.com/gantry-dev/gantry/spec"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

// Labels on everything Gantry makes in a cluster: a restarted server finds
// its Pods by them, adopts those of replicas it still has and deletes the
// others.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelCluster   = "gantry.dev/cluster"
	LabelService   = "gantry.dev/service"
	LabelReplica   = "gantry.dev/replica"
	LabelRevision  = "gantry.dev/revision"
	managedBy      = "gantry"
	// FieldManager owns the fields Gantry applies.
	FieldManager = "gantry"
	// Topology keys of the spread rules.
	zoneKey     = "topology.kubernetes.io/zone"
	hostnameKey = "kubernetes.io/hostname"
	// containerName is the one container of a replica's Pod.
	containerName = "main"
)

// Workload is one replica to run as a Pod: the replica, what its revision
// runs, and whether its placement gave it the TEE RuntimeClass.
type Workload struct {
	Cluster string
	Replica api.Replica
	Spec    api.ServiceSpec
	// Labels are the service's labels: the Pod carries them, so that
	// other services' affinity terms select it.
	Labels map[string]string
}

// PodName is the replica's Pod: it is named after the replica, so a
// second one cannot exist.
func PodName(replicaID string) string { return replicaID }

// SecretName is the Kubernetes Secret that holds a Gantry Secret's values.
func SecretName(gantrySecret string) string { return "gantry-" + gantrySecret }

// PriorityClassName is the PriorityClass of a priority and preemption
// policy ("" for priority 0 without preemption: the cluster's default).
func PriorityClassName(priority int, preempt bool) string {
	if priority == 0 && !preempt {
		return ""
	}
	name := "gantry-priority-" + strconv.Itoa(priority)
	if priority < 0 {
		name = "gantry-priority-minus-" + strconv.Itoa(-priority)
	}
	if preempt {
		name += "-preempting"
	}
	return name
}

// Pod is the Pod of a workload.
func Pod(w Workload, s spec.KubernetesSettings) *corev1ac.PodApplyConfiguration {
	r, sp := w.Replica, w.Spec
	labels := maps.Clone(w.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, map[string]string{LabelManagedBy: managedBy, LabelCluster: w.Cluster, LabelService: r.Service,
		LabelReplica: r.ID, LabelRevision: r.SpecHash})
	podSpec := corev1ac.PodSpec().
		WithContainers(container(w, s)).
		WithRestartPolicy(corev1.RestartPolicyAlways).
		WithEnableServiceLinks(false)
	if sp.StopTimeoutSeconds > 0 {
		podSpec.WithTerminationGracePeriodSeconds(int64(sp.StopTimeoutSeconds))
	}
	if len(sp.Placement.NodeSelector) > 0 || gpuRequired(sp) {
		podSpec.WithNodeSelector(nodeSelector(sp, s))
	}
	if r.RuntimeClass == "tee" {
		podSpec.WithRuntimeClassName(s.RuntimeClass)
	}
	if name := PriorityClassName(sp.Placement.Priority, sp.Placement.PreemptLowerPriority); name != "" {
		podSpec.WithPriorityClassName(name)
	}
	if aff := affinity(w, s); aff != nil {
		podSpec.WithAffinity(aff)
	}
	for _, rule := range sp.Placement.Spread {
		podSpec.WithTopologySpreadConstraints(corev1ac.TopologySpreadConstraint().
			WithMaxSkew(int32(rule.MaxSkew)).
			WithTopologyKey(topologyKey(rule.Key)).
			WithWhenUnsatisfiable(corev1.DoNotSchedule).
			WithLabelSelector(serviceSelector(w.Cluster, r.Service)))
	}
	return corev1ac.Pod(PodName(r.ID), s.Namespace).
		WithLabels(labels).
		WithAnnotations(map[string]string{"gantry.dev/index": strconv.Itoa(r.Index)}).
		WithSpec(podSpec)
}

func container(w Workload, s spec.KubernetesSettings) *corev1ac.ContainerApplyConfiguration {
	sp := w.Spec
	c := corev1ac.Container().WithName(containerName).WithImage(sp.Image).
		WithResources(resources(sp, s)).WithEnv(env(w)...)
	if len(sp.Command) > 0 {
		c.WithCommand(sp.Command...)
	}
	if len(sp.Args) > 0 {
		c.WithArgs(sp.Args...)
	}
	if sp.WorkingDir != "" {
		c.WithWorkingDir(sp.WorkingDir)
	}
	for _, p := range sp.Ports {
		c.WithPorts(corev1ac.ContainerPort().WithName(p.Name).WithContainerPort(int32(p.ContainerPort)).WithProtocol(protocol(p.Protocol)))
	}
	if h := sp.HealthCheck; h != nil {
		c.WithReadinessProbe(probe(*h, sp.Ports))
		c.WithLivenessProbe(probe(*h, sp.Ports))
	}
	return c
}

// env is the replica's environment: the spec's, Gantry's own variables
// (as agents set them; GANTRY_MACHINE is the node), its ports', and its
// Secrets' keys by reference to the Kubernetes Secrets that hold them.
func env(w Workload) []*corev1ac.EnvVarApplyConfiguration {
	sp := w.Spec
	vars := map[string]string{}
	ports := map[string]int{}
	for _, p := range sp.Ports {
		ports[p.Name] = p.ContainerPort
	}
	mainPort := ""
	if len(sp.Ports) > 0 {
		mainPort = sp.Ports[0].Name
	}
	for k, v := range runtime.PortEnv(runtime.Spec{MainPort: mainPort}, ports) {
		vars[k] = v
	}
	for k, v := range sp.Env {
		vars[k] = v
	}
	vars["GANTRY_REPLICA"], vars["GANTRY_SERVICE"] = w.Replica.ID, w.Replica.Service
	var out []*corev1ac.EnvVarApplyConfiguration
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		out = append(out, corev1ac.EnvVar().WithName(k).WithValue(vars[k]))
	}
	out = append(out, corev1ac.EnvVar().WithName("GANTRY_MACHINE").
		WithValueFrom(corev1ac.EnvVarSource().WithFieldRef(corev1ac.ObjectFieldSelector().WithFieldPath("spec.nodeName"))))
	for _, k := range slices.Sorted(maps.Keys(sp.SecretEnv)) {
		ref := sp.SecretEnv[k]
		out = append(out, corev1ac.EnvVar().WithName(k).WithValueFrom(corev1ac.EnvVarSource().
			WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(SecretName(ref.Name)).WithKey(ref.Key))))
	}
	return out
}

// resources: CPU as a request (a limit would throttle what the node has
// spare), memory and ephemeral storage as a request with an equal limit
// (what the replica is promised is what it may use), GPUs when required.
func resources(sp api.ServiceSpec, s spec.KubernetesSettings) *corev1ac.ResourceRequirementsApplyConfiguration {
	req := spec.Requests(sp)
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	if req.MilliCPU > 0 {
		requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(req.MilliCPU, resource.DecimalSI)
	}
	if req.MemoryBytes > 0 {
		q := *resource.NewQuantity(req.MemoryBytes, resource.BinarySI)
		requests[corev1.ResourceMemory], limits[corev1.ResourceMemory] = q, q
	}
	if req.EphemeralBytes > 0 {
		q := *resource.NewQuantity(req.EphemeralBytes, resource.BinarySI)
		requests[corev1.ResourceEphemeralStorage], limits[corev1.ResourceEphemeralStorage] = q, q
	}
	if gpuRequired(sp) {
		q := *resource.NewQuantity(int64(sp.Resources.GPU.Count), resource.DecimalSI)
		requests[corev1.ResourceName(s.GPUResource)], limits[corev1.ResourceName(s.GPUResource)] = q, q
	}
	out := corev1ac.ResourceRequirements()
	if len(requests) > 0 {
		out.WithRequests(requests)
	}
	if len(limits) > 0 {
		out.WithLimits(limits)
	}
	return out
}

func gpuRequired(sp api.ServiceSpec) bool {
	g := sp.Resources.GPU
	return g != nil && g.Count > 0 && g.Policy != api.GPUPreferred
}

func nodeSelector(sp api.ServiceSpec, s spec.KubernetesSettings) map[string]string {
	sel := map[string]string{}
	for k, v := range sp.Placement.NodeSelector {
		sel[k] = v
	}
	if gpuRequired(sp) {
		sel[s.GPUNodeLabel] = "true"
	}
	return sel
}

// gpuTerms are the node requirements of a GPU's type and VRAM: the type
// as the product label, the VRAM (GB) as a MiB label above the minimum.
func gpuTerms(g *api.GPURequirement, s spec.KubernetesSettings) []*corev1ac.NodeSelectorRequirementApplyConfiguration {
	var out []*corev1ac.NodeSelectorRequirementApplyConfiguration
	if g.Type != "" {
		out = append(out, corev1ac.NodeSelectorRequirement().WithKey(s.GPUProductLabel).WithOperator(corev1.NodeSelectorOpIn).WithValues(g.Type))
	}
	if g.MinVRAMGB > 0 {
		minMiB := int64(g.MinVRAMGB * 1024)
		out = append(out, corev1ac.NodeSelectorRequirement().WithKey(s.GPUMemoryLabel).WithOperator(corev1.NodeSelectorOpGt).
			WithValues(strconv.FormatInt(minMiB-1, 10)))
	}
	return out
}

// affinity: GPU type and VRAM as required node affinity (GPU required) or
// as a preferred one for GPU nodes (GPU preferred); dedicated as required
// anti-affinity with other services' Pods on a node; sameZone as required
// affinity with the service's own Pods in a zone.
func affinity(w Workload, s spec.KubernetesSettings) *corev1ac.AffinityApplyConfiguration {
	sp := w.Spec
	var aff *corev1ac.AffinityApplyConfiguration
	ensure := func() *corev1ac.AffinityApplyConfiguration {
		if aff == nil {
			aff = corev1ac.Affinity()
		}
		return aff
	}
	if g := sp.Resources.GPU; g != nil && g.Count > 0 {
		terms := gpuTerms(g, s)
		switch {
		case gpuRequired(sp) && len(terms) > 0:
			ensure().WithNodeAffinity(corev1ac.NodeAffinity().WithRequiredDuringSchedulingIgnoredDuringExecution(
				corev1ac.NodeSelector().WithNodeSelectorTerms(corev1ac.NodeSelectorTerm().WithMatchExpressions(terms...))))
		case !gpuRequired(sp):
			terms = append([]*corev1ac.NodeSelectorRequirementApplyConfiguration{corev1ac.NodeSelectorRequirement().
				WithKey(s.GPUNodeLabel).WithOperator(corev1.NodeSelectorOpIn).WithValues("true")}, terms...)
			ensure().WithNodeAffinity(corev1ac.NodeAffinity().WithPreferredDuringSchedulingIgnoredDuringExecution(
				corev1ac.PreferredSchedulingTerm().WithWeight(s.GPUPreferredWeight).
					WithPreference(corev1ac.NodeSelectorTerm().WithMatchExpressions(terms...))))
		}
	}
	if sp.Placement.Dedicated {
		others := metav1ac.LabelSelector().WithMatchExpressions(
			metav1ac.LabelSelectorRequirement().WithKey(LabelService).WithOperator("Exists"),
			metav1ac.LabelSelectorRequirement().WithKey(LabelService).WithOperator("NotIn").WithValues(w.Replica.Service))
		ensure().WithPodAntiAffinity(corev1ac.PodAntiAffinity().WithRequiredDuringSchedulingIgnoredDuringExecution(
			corev1ac.PodAffinityTerm().WithTopologyKey(hostnameKey).WithLabelSelector(others)))
	}
	if sp.Placement.SameZone {
		ensure().WithPodAffinity(corev1ac.PodAffinity().WithRequiredDuringSchedulingIgnoredDuringExecution(
			corev1ac.PodAffinityTerm().WithTopologyKey(zoneKey).WithLabelSelector(serviceSelector(w.Cluster, w.Replica.Service))))
	}
	for _, t := range sp.Placement.Affinity {
		term := podAffinityTerm(w.Cluster, t)
		if t.Required() {
			ensure().WithPodAffinity(corev1ac.PodAffinity().WithRequiredDuringSchedulingIgnoredDuringExecution(term))
		} else {
			ensure().WithPodAffinity(corev1ac.PodAffinity().WithPreferredDuringSchedulingIgnoredDuringExecution(
				corev1ac.WeightedPodAffinityTerm().WithWeight(int32(t.Weight)).WithPodAffinityTerm(term)))
		}
	}
	for _, t := range sp.Placement.AntiAffinity {
		term := podAffinityTerm(w.Cluster, t)
		if t.Required() {
			ensure().WithPodAntiAffinity(corev1ac.PodAntiAffinity().WithRequiredDuringSchedulingIgnoredDuringExecution(term))
		} else {
			ensure().WithPodAntiAffinity(corev1ac.PodAntiAffinity().WithPreferredDuringSchedulingIgnoredDuringExecution(
				corev1ac.WeightedPodAffinityTerm().WithWeight(int32(t.Weight)).WithPodAffinityTerm(term)))
		}
	}
	return aff
}

// podAffinityTerm selects the cluster's Gantry Pods whose service has the
// term's labels, on the same node or in the same zone.
func podAffinityTerm(cluster string, t api.AffinityTerm) *corev1ac.PodAffinityTermApplyConfiguration {
	match := maps.Clone(t.Selector)
	match[LabelCluster] = cluster
	return corev1ac.PodAffinityTerm().WithTopologyKey(topologyKey(t.Topology)).
		WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(match))
}

func serviceSelector(cluster, service string) *metav1ac.LabelSelectorApplyConfiguration {
	return metav1ac.LabelSelector().WithMatchLabels(map[string]string{LabelCluster: cluster, LabelService: service})
}

func topologyKey(spreadKey string) string {
	if spreadKey == api.SpreadZone {
		return zoneKey
	}
	return hostnameKey
}

// probe is a health check as a probe: the same check, period, timeout and
// failure threshold.
func probe(h api.HealthCheck, ports []api.Port) *corev1ac.ProbeApplyConfiguration {
	p := corev1ac.Probe()
	switch {
	case h.HTTP != nil:
		p.WithHTTPGet(corev1ac.HTTPGetAction().WithPath(h.HTTP.Path).WithPort(portRef(h.HTTP.Port, ports)))
	case h.TCP != nil:
		p.WithTCPSocket(corev1ac.TCPSocketAction().WithPort(portRef(h.TCP.Port, ports)))
	case h.Exec != nil:
		p.WithExec(corev1ac.ExecAction().WithCommand(h.Exec.Command...))
	}
	if h.IntervalSeconds > 0 {
		p.WithPeriodSeconds(int32(h.IntervalSeconds))
	}
	if h.TimeoutSeconds > 0 {
		p.WithTimeoutSeconds(int32(h.TimeoutSeconds))
	}
	if h.FailureThreshold > 0 {
		p.WithFailureThreshold(int32(h.FailureThreshold))
	}
	return p
}

// portRef is a declared port's number.
func portRef(name string, ports []api.Port) intstr.IntOrString {
	i := slices.IndexFunc(ports, func(p api.Port) bool { return p.Name == name })
	if i < 0 {
		return intstr.FromString(name)
	}
	return intstr.FromInt32(int32(ports[i].ContainerPort))
}

func protocol(p string) corev1.Protocol {
	switch p {
	case "udp", "UDP":
		return corev1.ProtocolUDP
	case "sctp", "SCTP":
		return corev1.ProtocolSCTP
	}
	return corev1.ProtocolTCP
}
