package kube

import (
	"strconv"

	"github.com/gantry-dev/gantry/api"
	"github.com/gantry-dev/gantry/spec"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	schedulingv1ac "k8s.io/client-go/applyconfigurations/scheduling/v1"
)

// Service is the Kubernetes Service of a Gantry service with ports: a
// ClusterIP Service named after it that selects its Pods, so clients find
// the replicas of every revision by one name.
func Service(cluster string, svc api.ServiceSpec, name string, s spec.KubernetesSettings) *corev1ac.ServiceApplyConfiguration {
	spec := corev1ac.ServiceSpec().WithSelector(map[string]string{LabelCluster: cluster, LabelService: name})
	for _, p := range svc.Ports {
		spec.WithPorts(corev1ac.ServicePort().WithName(p.Name).WithPort(int32(p.ContainerPort)).
			WithTargetPort(intstr.FromInt32(int32(p.ContainerPort))).WithProtocol(protocol(p.Protocol)))
	}
	return corev1ac.Service(name, s.Namespace).
		WithLabels(map[string]string{LabelManagedBy: managedBy, LabelCluster: cluster, LabelService: name}).
		WithSpec(spec)
}

// Secret is the Kubernetes Secret that holds the keys of a Gantry Secret
// that the cluster's Pods use; they read them by reference, so no value
// is ever in a Pod's spec.
func Secret(cluster, name string, values map[string]string, s spec.KubernetesSettings) *corev1ac.SecretApplyConfiguration {
	data := make(map[string][]byte, len(values))
	for k, v := range values {
		data[k] = []byte(v)
	}
	return corev1ac.Secret(SecretName(name), s.Namespace).
		WithLabels(map[string]string{LabelManagedBy: managedBy, LabelCluster: cluster}).
		WithType(corev1.SecretTypeOpaque).
		WithData(data)
}

// PriorityClass is the cluster-wide class of a priority: Kubernetes takes
// a Pod's priority only from one.
func PriorityClass(priority int, preempt bool) *schedulingv1ac.PriorityClassApplyConfiguration {
	policy := corev1.PreemptNever
	if preempt {
		policy = corev1.PreemptLowerPriority
	}
	return schedulingv1ac.PriorityClass(PriorityClassName(priority, preempt)).
		WithLabels(map[string]string{LabelManagedBy: managedBy}).
		WithValue(int32(priority)).
		WithPreemptionPolicy(policy).
		WithDescription("Gantry replicas of placement.priority " + strconv.Itoa(priority))
}

// Namespace is the namespace of Gantry's objects.
func Namespace(s spec.KubernetesSettings) *corev1ac.NamespaceApplyConfiguration {
	return corev1ac.Namespace(s.Namespace).WithLabels(map[string]string{LabelManagedBy: managedBy})
}
