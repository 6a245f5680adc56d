//go:build kubernetes

package kubernetes

import (
	"context"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// A node that cannot be placed says why with an event, not only on Describe: NodeWaiting
// carries the scheduler's message ("0/1 nodes are available: 1 Insufficient cpu.").
func TestClusterUnschedulableIsAnEvent(t *testing.T) {
	t.Parallel()
	cfg := clusterConfig(t)
	cfg.RequestScale = 1
	d := newClusterDriver(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := d.Create(ctx, driver.NodeSpec{Key: "big16", Owner: "ws/big", VMSize: "Standard_D16s_v3", VCPUs: 16, MemoryGB: 64}); err != nil {
		t.Fatal(err)
	}
	ev := waitEvent(t, d, "NodeWaiting of big16", func(ev driver.Event) bool { return ev.Kind == driver.NodeWaiting && ev.NodeKey == "big16" })
	if !strings.HasPrefix(ev.Reason, "Unschedulable") || !strings.Contains(ev.Reason, "Insufficient cpu") {
		t.Fatalf("NodeWaiting reason %q; want the scheduler's Insufficient cpu message", ev.Reason)
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
	if _, err := d.Create(ctx, driver.NodeSpec{Key: "iso", Owner: "ws/iso", VMSize: "Standard_F72s_v2", VCPUs: 72, MemoryGB: 144}); err != nil {
		t.Fatal(err)
	}
	ev := waitEvent(t, d, "NodeWaiting of iso", func(ev driver.Event) bool { return ev.Kind == driver.NodeWaiting && ev.NodeKey == "iso" })
	if !strings.Contains(ev.Reason, "anti-affinity") {
		t.Fatalf("NodeWaiting reason %q; want the scheduler naming the pod anti-affinity", ev.Reason)
	}
	for _, key := range []string{"iso", "small"} {
		if err := d.Terminate(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
}
