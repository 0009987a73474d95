package kube

import (
	"fmt"
	"strings"

	"github.com/gantry-dev/gantry/api"
	corev1 "k8s.io/api/core/v1"
)

// Status is a Pod's state as its replica's:
//
//	Pending, not scheduled         → pending, with the scheduler's reason
//	Pending, scheduled             → starting (image pull, container creation)
//	Running, ready                 → running (healthy when it has a probe)
//	Running, container waiting     → crashed (CrashLoopBackOff and kin)
//	Running, not ready             → starting (its readiness gates it)
//	Failed                         → failed
//	Succeeded                      → exited
//	Unknown                        → unknown
//
// Restarts are its containers' restart counts.
func Status(pod *corev1.Pod, hasProbe bool) api.ReplicaStatus {
	st := api.ReplicaStatus{ReplicaID: pod.Labels[LabelReplica], SpecHash: pod.Labels[LabelRevision], Node: pod.Spec.NodeName}
	for _, cs := range pod.Status.ContainerStatuses {
		st.Restarts += int(cs.RestartCount)
	}
	if pod.DeletionTimestamp != nil {
		st.State, st.Message = api.ReplicaStarting, "Pod is being deleted"
		return st
	}
	switch pod.Status.Phase {
	case corev1.PodPending, "":
		st.State, st.Message = pending(pod)
	case corev1.PodRunning:
		st.State, st.Health, st.Message = runningState(pod, hasProbe)
	case corev1.PodFailed:
		st.State, st.Message = api.ReplicaFailed, podMessage(pod, "Pod failed")
	case corev1.PodSucceeded:
		st.State, st.Message = api.ReplicaExited, podMessage(pod, "container exited 0")
	default:
		st.State, st.Message = api.ReplicaUnknown, podMessage(pod, "node stopped reporting the Pod")
	}
	return st
}

func pending(pod *corev1.Pod) (api.ReplicaState, string) {
	if c := condition(pod, corev1.PodScheduled); pod.Spec.NodeName == "" {
		if c != nil && c.Status == corev1.ConditionFalse && c.Message != "" {
			return api.ReplicaPending, c.Message
		}
		return api.ReplicaPending, "waiting for the Kubernetes scheduler"
	}
	if why := waiting(pod); why != "" {
		return api.ReplicaStarting, why
	}
	return api.ReplicaStarting, "scheduled on node " + pod.Spec.NodeName
}

func runningState(pod *corev1.Pod, hasProbe bool) (api.ReplicaState, api.Health, string) {
	ready := condition(pod, corev1.PodReady)
	isReady := ready != nil && ready.Status == corev1.ConditionTrue
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" {
			return api.ReplicaCrashed, healthOf(false, hasProbe), containerWhy(cs)
		}
	}
	switch {
	case isReady:
		return api.ReplicaRunning, healthOf(true, hasProbe), ""
	default:
		msg := "not ready yet"
		if ready != nil && ready.Message != "" {
			msg = "not ready yet: " + ready.Message
		}
		return api.ReplicaStarting, healthOf(false, hasProbe), msg
	}
}

func healthOf(ready, hasProbe bool) api.Health {
	switch {
	case !hasProbe:
		return ""
	case ready:
		return api.HealthHealthy
	}
	return api.HealthUnknown
}

func waiting(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
			return containerWhy(cs)
		}
	}
	return ""
}

func containerWhy(cs corev1.ContainerStatus) string {
	w := cs.State.Waiting
	if w == nil {
		return ""
	}
	msg := w.Reason
	if w.Message != "" {
		msg += ": " + w.Message
	}
	if t := cs.LastTerminationState.Terminated; t != nil {
		msg += fmt.Sprintf(" (last exit %d", t.ExitCode)
		if t.Reason != "" {
			msg += ", " + t.Reason
		}
		msg += ")"
	}
	return msg
}

func podMessage(pod *corev1.Pod, fallback string) string {
	parts := []string{}
	if pod.Status.Reason != "" {
		parts = append(parts, pod.Status.Reason)
	}
	if pod.Status.Message != "" {
		parts = append(parts, pod.Status.Message)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			parts = append(parts, fmt.Sprintf("exit code %d", t.ExitCode))
		}
	}
	if len(parts) == 0 {
		return fallback
	}
	return strings.Join(parts, ": ")
}

func condition(pod *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == typ {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}
