package kubernetes

import (
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// TestBuildPodOfAnIsolatedSizeRunsAlone: an isolated size's pod has a required
// anti-affinity, per host, against every node pod of its engine; other sizes have none.
func TestBuildPodOfAnIsolatedSizeRunsAlone(t *testing.T) {
	ps := testPodSpec()
	pod, err := buildPod(ps, driver.NodeSpec{Key: "iso", Owner: "ws/big", VMSize: "Standard_F72s_v2", VCPUs: 72, MemoryGB: 144})
	if err != nil {
		t.Fatal(err)
	}
	a := pod.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Fatalf("affinity %+v; want one required pod anti-affinity term", a)
	}
	term := a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
	if term.TopologyKey != "kubernetes.io/hostname" || term.LabelSelector == nil ||
		term.LabelSelector.MatchLabels[LabelEngine] != pod.Labels[LabelEngine] || len(term.LabelSelector.MatchLabels) != 1 {
		t.Fatalf("anti-affinity term %+v; want every pod labelled %s=%s, per host", term, LabelEngine, pod.Labels[LabelEngine])
	}
	other, err := buildPod(ps, driver.NodeSpec{Key: "cpu", Owner: "ws/cpu", VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14})
	if err != nil {
		t.Fatal(err)
	}
	if other.Spec.Affinity != nil {
		t.Fatalf("a size that is not isolated has affinity %+v", other.Spec.Affinity)
	}
}

func TestUnschedulableReasons(t *testing.T) {
	for reason, want := range map[string]bool{
		"Unschedulable: 0/1 nodes are available: 1 Insufficient cpu.": true,
		"Unschedulable":     true,
		"Pending":           false,
		"ContainerCreating": false,
		"SchedulingGated":   false,
	} {
		if got := unschedulable(reason); got != want {
			t.Errorf("unschedulable(%q) = %v; want %v", reason, got, want)
		}
	}
}
