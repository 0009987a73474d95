package kube

import (
	"testing"

	"github.com/gantry-dev/gantry/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStatusMapsPodPhases(t *testing.T) {
	cond := func(typ corev1.PodConditionType, status corev1.ConditionStatus, msg string) corev1.PodCondition {
		return corev1.PodCondition{Type: typ, Status: status, Message: msg}
	}
	running := corev1.ContainerStatus{Name: containerName, Ready: true, RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	for _, tc := range []struct {
		name     string
		pod      corev1.Pod
		probe    bool
		state    api.ReplicaState
		health   api.Health
		message  string
		restarts int
	}{
		{name: "unscheduled", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{cond(corev1.PodScheduled, corev1.ConditionFalse, "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")}}},
			state: api.ReplicaPending, message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."},
		{name: "pulling", pod: corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
			ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}}},
			state: api.ReplicaStarting, message: "ErrImagePull: not found"},
		{name: "running and ready", probe: true, pod: corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionTrue, "")}, ContainerStatuses: []corev1.ContainerStatus{running}}},
			state: api.ReplicaRunning, health: api.HealthHealthy, restarts: 2},
		{name: "running, not ready", probe: true, pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionFalse, "containers with unready status: [main]")}}},
			state: api.ReplicaStarting, health: api.HealthUnknown, message: "not ready yet: containers with unready status: [main]"},
		{name: "crash loop", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{RestartCount: 5,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}}},
			state: api.ReplicaCrashed, message: "CrashLoopBackOff (last exit 3, Error)", restarts: 5},
		{name: "failed", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory"}},
			state: api.ReplicaFailed, message: "Evicted: low on memory"},
		{name: "succeeded", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, state: api.ReplicaExited, message: "container exited 0"},
		{name: "unknown", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodUnknown}}, state: api.ReplicaUnknown, message: "node stopped reporting the Pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.pod.ObjectMeta = metav1.ObjectMeta{Labels: map[string]string{LabelReplica: "web-0", LabelRevision: "abc"}}
			st := Status(&tc.pod, tc.probe)
			if st.ReplicaID != "web-0" || st.SpecHash != "abc" || st.State != tc.state || st.Health != tc.health || st.Message != tc.message || st.Restarts != tc.restarts {
				t.Errorf("Status = %+v, want %s/%q %q restarts %d", st, tc.state, tc.health, tc.message, tc.restarts)
			}
		})
	}
}
