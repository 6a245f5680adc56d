//go:build kubernetes

package kubernetes

import (
	"context"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// A node that cannot be placed says why, not only on Describe: Create's answer or a
// NodeWaiting event carries the scheduler's message ("0/1 nodes are available: 1
// Insufficient cpu.").
func TestClusterUnschedulableIsAnEvent(t *testing.T) {
	t.Parallel()
	cfg := clusterConfig(t)
	cfg.RequestScale = 1
	d := newClusterDriver(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	reason := waitingReason(t, d, driver.NodeSpec{Key: "big16", Owner: "ws/big", VMSize: "Standard_D16s_v3", VCPUs: 16, MemoryGB: 64})
	if !strings.HasPrefix(reason, "Unschedulable") || !strings.Contains(reason, "Insufficient cpu") {
		t.Fatalf("waiting reason %q; want the scheduler's Insufficient cpu message", reason)
	}
	if err := d.Terminate(ctx, "big16"); err != nil {
		t.Fatal(err)
	}
}

// An isolated size's pod runs alone: on the single-node test cluster, with a small node
// already running, it stays unschedulable, naming the anti-affinity.
func TestClusterIsolatedSizeRunsAlone(t *testing.T) {
	t.Parallel()
	cfg := clusterConfig(t)
	// Small enough requests that the 72-vCPU size fits the test node's resources, so the
	// anti-affinity is the only thing that keeps it off the node.
	cfg.RequestScale = 0.005
	d := newClusterDriver(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	readyNode(t, d, driver.NodeSpec{Key: "small", Owner: "ws/cpu", VMSize: "Standard_DS1_v2", VCPUs: 1, MemoryGB: 3.5})
	reason := waitingReason(t, d, driver.NodeSpec{Key: "iso", Owner: "ws/iso", VMSize: "Standard_F72s_v2", VCPUs: 72, MemoryGB: 144})
	if !strings.Contains(reason, "anti-affinity") {
		t.Fatalf("waiting reason %q; want the scheduler naming the pod anti-affinity", reason)
	}
	for _, key := range []string{"iso", "small"} {
		if err := d.Terminate(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
}
