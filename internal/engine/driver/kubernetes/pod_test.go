package kubernetes

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

func TestPodNameIsADeterministicDNSLabel(t *testing.T) {
	cases := []struct{ engine, key, want string }{
		{"mlc-1a2b3c4d", "node-0a1b2c3d4e", "mlc-1a2b3c4d-node-0a1b2c3d4e"},
		{"mlc-1a2b3c4d", "Node_1.x", ""},
		{"mlc-1a2b3c4d", strings.Repeat("k", 100), ""},
		{"ENGINE", "_", ""},
	}
	seen := map[string]string{}
	for _, c := range cases {
		got := PodName(c.engine, c.key)
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Errorf("PodName(%q, %q) = %q, not a DNS-1123 label: %v", c.engine, c.key, got, errs)
		}
		if c.want != "" && got != c.want {
			t.Errorf("PodName(%q, %q) = %q, want %q", c.engine, c.key, got, c.want)
		}
		if again := PodName(c.engine, c.key); again != got {
			t.Errorf("PodName(%q, %q) is not deterministic: %q then %q", c.engine, c.key, got, again)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("PodName gives %q to two keys: %q and %q", got, other, c.key)
		}
		seen[got] = c.key
	}
	// Keys that clean to the same text still get different names.
	if a, b := PodName("e", "a_b"), PodName("e", "a.b"); a == b {
		t.Errorf("PodName of a_b and a.b are both %q", a)
	}
}

func TestLabelValuesAreLabelSafe(t *testing.T) {
	for _, s := range []string{"ws/cpu", "mlc-1a2b", "", "-x-", strings.Repeat("a/", 60)} {
		got := labelValue(s)
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("labelValue(%q) = %q: %v", s, got, errs)
		}
	}
	if got := labelValue("mlc-1a2b"); got != "mlc-1a2b" {
		t.Errorf("labelValue of a label-safe value changed it: %q", got)
	}
	if labelValue("ws/a_b") == labelValue("ws_a/b") {
		t.Error("labelValue maps two owners to one value")
	}
}

func testPodSpec() podSpec {
	return podSpec{namespace: "ml", engineID: "mlc-1", image: "img:1", nodeSelector: map[string]string{"pool": "cpu"}}
}

func TestBuildPodOfAVMSize(t *testing.T) {
	pod, err := buildPod(testPodSpec(), driver.NodeSpec{Key: "n1", Owner: "ws/cpu", VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Name != "mlc-1-n1" || pod.Namespace != "ml" {
		t.Errorf("pod %s/%s, want ml/mlc-1-n1", pod.Namespace, pod.Name)
	}
	if pod.Labels[LabelEngine] != "mlc-1" || pod.Labels[LabelNode] != "n1" || pod.Labels[LabelOwner] != labelValue("ws/cpu") {
		t.Errorf("labels %v", pod.Labels)
	}
	if pod.Annotations[AnnotationOwner] != "ws/cpu" || pod.Annotations[AnnotationNode] != "n1" || pod.Annotations[AnnotationEngine] != "mlc-1" {
		t.Errorf("annotations %v", pod.Annotations)
	}
	s := pod.Spec
	if s.RestartPolicy != corev1.RestartPolicyNever || s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken {
		t.Errorf("restart policy %s, automount %v", s.RestartPolicy, s.AutomountServiceAccountToken)
	}
	if s.NodeSelector["pool"] != "cpu" || len(s.NodeSelector) != 1 {
		t.Errorf("node selector %v", s.NodeSelector)
	}
	c := s.Containers[0]
	if c.Image != "img:1" || c.ImagePullPolicy != corev1.PullIfNotPresent || c.Command[0] != "/bin/sh" {
		t.Errorf("container %+v", c)
	}
	wantCPU, wantMem := resource.MustParse("4"), resource.MustParse("14Gi")
	for what, l := range map[string]corev1.ResourceList{"requests": c.Resources.Requests, "limits": c.Resources.Limits} {
		if q := l[corev1.ResourceCPU]; q.Cmp(wantCPU) != 0 {
			t.Errorf("%s cpu %s, want 4", what, q.String())
		}
		if q := l[corev1.ResourceMemory]; q.Cmp(wantMem) != 0 {
			t.Errorf("%s memory %s, want 14Gi", what, q.String())
		}
	}
	if _, ok := c.Resources.Limits[GPUResource]; ok {
		t.Errorf("a CPU size got GPUs: %v", c.Resources.Limits)
	}
}

func TestBuildPodOfAGPUSizeLimitsGPUs(t *testing.T) {
	pod, err := buildPod(testPodSpec(), driver.NodeSpec{Key: "g", Owner: "ws/gpu", VMSize: "Standard_NC6", VCPUs: 6, MemoryGB: 56})
	if err != nil {
		t.Fatal(err)
	}
	q := pod.Spec.Containers[0].Resources.Limits[GPUResource]
	if q.Value() != 1 {
		t.Errorf("nvidia.com/gpu limit %s, want 1 (Standard_NC6)", q.String())
	}
}

func TestBuildPodScalesRequestsNotLimits(t *testing.T) {
	ps := testPodSpec()
	ps.requestScale = 0.25
	pod, err := buildPod(ps, driver.NodeSpec{Key: "n", VCPUs: 4, MemoryGB: 16})
	if err != nil {
		t.Fatal(err)
	}
	r := pod.Spec.Containers[0].Resources
	if q := r.Requests[corev1.ResourceCPU]; q.MilliValue() != 1000 {
		t.Errorf("scaled cpu request %s, want 1", q.String())
	}
	if q := r.Requests[corev1.ResourceMemory]; q.Value() != 4<<30 {
		t.Errorf("scaled memory request %s, want 4Gi", q.String())
	}
	if q := r.Limits[corev1.ResourceCPU]; q.Value() != 4 {
		t.Errorf("cpu limit %s, want 4", q.String())
	}
}

func TestBuildPodOfAnInstanceType(t *testing.T) {
	spec := driver.NodeSpec{Key: "n", Owner: "ws/k8s", VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14, Pod: &driver.PodShape{
		InstanceType: "small",
		NodeSelector: map[string]string{"accel": "none", "pool": "small"},
		Requests:     map[string]string{"cpu": "500m", "memory": "1Gi"},
		Limits:       map[string]string{"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "1"},
	}}
	pod, err := buildPod(testPodSpec(), spec)
	if err != nil {
		t.Fatal(err)
	}
	r := pod.Spec.Containers[0].Resources
	if q := r.Requests[corev1.ResourceCPU]; q.String() != "500m" {
		t.Errorf("cpu request %s, want the instance type's 500m (not the VM size's)", q.String())
	}
	if q := r.Limits[GPUResource]; q.Value() != 1 {
		t.Errorf("gpu limit %s", q.String())
	}
	if sel := pod.Spec.NodeSelector; sel["pool"] != "small" || sel["accel"] != "none" {
		t.Errorf("node selector %v: want the instance type's merged over --kube-node-selector", sel)
	}
	spec.Pod.Requests["cpu"] = "lots"
	if _, err := buildPod(testPodSpec(), spec); err == nil || !strings.Contains(err.Error(), `"lots"`) {
		t.Errorf("a bad quantity: %v, want an error naming it", err)
	}
}

func pendingPod() *corev1.Pod {
	return &corev1.Pod{
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: containerName}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

func TestStateOfMapsKubernetesReasons(t *testing.T) {
	now := metav1.Now()
	cases := []struct {
		name   string
		edit   func(*corev1.Pod)
		ready  bool
		gone   bool
		reason string
	}{
		{"pending", func(*corev1.Pod) {}, false, false, "Pending"},
		{"gated", func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "g"}} }, false, false, "SchedulingGated"},
		{"unschedulable", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient cpu."}}
		}, false, false, "Unschedulable: 0/1 nodes are available: 1 Insufficient cpu."},
		{"creating", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
		}, false, false, "ContainerCreating"},
		{"image pull back-off", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image \"nope\""}}}}
		}, false, true, `ImagePullBackOff: Back-off pulling image "nope"`},
		{"running", func(p *corev1.Pod) {
			p.Status.Phase, p.Status.PodIP = corev1.PodRunning, "10.88.0.7"
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		}, true, false, ""},
		{"evicted", func(p *corev1.Pod) {
			p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
		}, false, true, "the pod ended: Evicted: The node was low on resource: memory."},
		{"oom killed", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}}}
		}, false, true, "the pod ended: OOMKilled (exit code 137)"},
		{"deleted", func(p *corev1.Pod) { p.DeletionTimestamp = &now }, false, true, "the pod was deleted"},
		{"evicted by the API", func(p *corev1.Pod) {
			p.DeletionTimestamp = &now
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}}
		}, false, true, "the pod was deleted: EvictionByEvictionAPI: Eviction API: evicting"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := pendingPod()
			c.edit(p)
			st := stateOf(p)
			if st.ready != c.ready || st.gone != c.gone || st.reason != c.reason {
				t.Errorf("stateOf = %+v, want ready %v gone %v reason %q", st, c.ready, c.gone, c.reason)
			}
		})
	}
}
