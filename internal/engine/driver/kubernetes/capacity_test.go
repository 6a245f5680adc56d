package kubernetes

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

func capNode(name, cpu, memory string, labels map[string]string, extra ...string) corev1.Node {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	for i := 0; i+1 < len(extra); i += 2 {
		alloc[corev1.ResourceName(extra[i])] = resource.MustParse(extra[i+1])
	}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Status: corev1.NodeStatus{Allocatable: alloc}}
}

func capNodes() []corev1.Node {
	cordoned := capNode("cpu-3", "16", "64Gi", map[string]string{"pool": "cpu"})
	cordoned.Spec.Unschedulable = true
	return []corev1.Node{
		capNode("cpu-1", "3800m", "15Gi", map[string]string{"pool": "cpu"}),
		capNode("cpu-2", "4", "16Gi", map[string]string{"pool": "cpu"}),
		cordoned,
		capNode("gpu-1", "8", "61.5Gi", map[string]string{"pool": "gpu"}, "nvidia.com/gpu", "1"),
	}
}

var (
	capCPUType  = driver.PodShape{InstanceType: "cpu", NodeSelector: map[string]string{"pool": "cpu"}, Requests: map[string]string{"cpu": "2", "memory": "8Gi"}}
	capGPUType  = driver.PodShape{InstanceType: "gpu", NodeSelector: map[string]string{"pool": "gpu"}, Limits: map[string]string{"nvidia.com/gpu": "1"}}
	capAnyType  = driver.PodShape{InstanceType: "defaultinstancetype", Requests: map[string]string{"cpu": "100m", "memory": "2Gi"}}
	capNoneType = driver.PodShape{InstanceType: "tpu", NodeSelector: map[string]string{"pool": "tpu"}}
)

func TestSumCapacity(t *testing.T) {
	for _, tc := range []struct {
		name   string
		types  []driver.PodShape
		nodes  int
		vcpus  int64
		memory float64
	}{
		{"OnePool", []driver.PodShape{capCPUType}, 2, 7, 31},
		{"TwoPoolsEachNodeOnce", []driver.PodShape{capCPUType, capGPUType, capCPUType}, 3, 15, 92.5},
		{"NoSelectorEveryNode", []driver.PodShape{capAnyType, capGPUType}, 3, 15, 92.5},
		{"NoMatch", []driver.PodShape{capNoneType}, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SumCapacity(capNodes(), tc.types)
			if got.Nodes != tc.nodes || got.VCPUs != tc.vcpus || got.MemoryGB != tc.memory || !got.Listed {
				t.Fatalf("got %+v, want %d nodes, %d vCPUs, %v GiB", got, tc.nodes, tc.vcpus, tc.memory)
			}
		})
	}
}

func TestSatisfiable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape driver.PodShape
		says  string // "" when some node fits
	}{
		{"Fits", capCPUType, ""},
		{"LimitCountsAsRequest", capGPUType, ""},
		{"TooBig", driver.PodShape{InstanceType: "big", NodeSelector: map[string]string{"pool": "cpu"}, Requests: map[string]string{"cpu": "8", "memory": "8Gi"}},
			`instance type "big" requests more than any of its 2 node(s) can give (cpu-1: cpu 3800m allocatable < 8 requested; cpu-2: cpu 4 allocatable < 8 requested)`},
		{"NoGPUOnCPUNodes", driver.PodShape{InstanceType: "gpu-anywhere", Limits: map[string]string{"nvidia.com/gpu": "2"}},
			`instance type "gpu-anywhere" requests more than any of its 3 node(s)`},
		{"NoNode", capNoneType, `instance type "tpu" cannot run anywhere: no schedulable node of the cluster has the labels of its node_selector pool=tpu`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Satisfiable(capNodes(), tc.shape)
			switch {
			case tc.says == "" && err != nil:
				t.Fatalf("want it to fit, got %v", err)
			case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
				t.Fatalf("got %v, want %q", err, tc.says)
			}
		})
	}
}

func TestListNodesForbidden(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", nil)
	})
	_, listed, err := listNodesWith(context.Background(), cs)
	if err != nil || listed {
		t.Fatalf("credentials that may not list nodes: listed %v, err %v; want unknown capacity and no error", listed, err)
	}
}
