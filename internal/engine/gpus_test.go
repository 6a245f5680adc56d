package engine

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
)

// gpuRig is an engine whose local nodes share a machine of four GPUs.
func gpuRig(t *testing.T) *rig {
	t.Helper()
	r := newRigConfigured(t, func(cfg *Config, _ *Engine) { cfg.GPUs = []string{"0", "1", "2", "3"} })
	r.workspace("lab", map[string]int64{"standardNCSv3Family": 1000})
	return r
}

func newRigConfigured(t *testing.T, configure func(*Config, *Engine)) *rig {
	t.Helper()
	r := newRig(t)
	r.stop()
	r.configure = configure
	r.start()
	return r
}

func (r *rig) gpuCluster(name, size string, min int64) {
	r.t.Helper()
	_, err := r.e.CreateCompute(context.Background(), "lab", api.ComputeSpec{
		Name: name, VMSize: size, ScaleSettings: &api.ScaleSettings{MinNodeCount: min, MaxNodeCount: min},
	}, "")
	if err != nil {
		r.t.Fatal(err)
	}
}

// nodeGPUs is what the driver was asked to give the single node of a compute.
func (r *rig) nodeGPUs(name string) []string {
	r.t.Helper()
	c := r.compute("lab", name)
	if len(c.Nodes) != 1 {
		r.t.Fatalf("compute %s has %d nodes; want 1", name, len(c.Nodes))
	}
	spec, ok := r.drv.Node(c.Nodes[0].ID)
	if !ok {
		return nil
	}
	if !slices.Equal(spec.GPUs, c.Nodes[0].GPUs) {
		r.t.Fatalf("node %s holds GPUs %v in the store but the driver was given %v", c.Nodes[0].ID, c.Nodes[0].GPUs, spec.GPUs)
	}
	return spec.GPUs
}

// TestGPUsAreHeldByOneNodeAtATime: two 2-GPU nodes get disjoint GPUs; a third waits,
// saying why on the node, the compute and a job, and gets the GPUs of the first once that
// node is released.
func TestGPUsAreHeldByOneNodeAtATime(t *testing.T) {
	r := gpuRig(t)
	r.gpuCluster("gpua", "Standard_NC12s_v3", 1)
	r.gpuCluster("gpub", "Standard_NC12s_v3", 1)
	r.settlesTo("a and b up", func() bool {
		return countState(r.compute("lab", "gpua"), api.NodeIdle) == 1 && countState(r.compute("lab", "gpub"), api.NodeIdle) == 1
	})
	a, b := r.nodeGPUs("gpua"), r.nodeGPUs("gpub")
	if len(a) != 2 || len(b) != 2 || slices.ContainsFunc(a, func(g string) bool { return slices.Contains(b, g) }) {
		t.Fatalf("nodes got GPUs %v and %v; want two each, disjoint", a, b)
	}

	r.gpuCluster("gpuc", "Standard_NC12s_v3", 1)
	j := r.submit("lab", "gpuc", 1)
	const want = "size Standard_NC12s_v3 needs 2 GPUs and 0 of this machine's 4 are free"
	r.settlesTo("c waits in preparing, saying why", func() bool {
		c := r.compute("lab", "gpuc")
		return countState(c, api.NodePreparing) == 1 && c.Nodes[0].Reason == want
	})
	if got := r.nodeGPUs("gpuc"); got != nil {
		t.Fatalf("the waiting node was created with GPUs %v", got)
	}
	if errs := r.compute("lab", "gpuc").Errors; len(errs) == 0 || !strings.Contains(errs[0].Message, want) || errs[0].Code != api.ErrorNoCapacity {
		t.Fatalf("compute errors %+v; want a NoCapacity error saying %q", errs, want)
	}
	if got := r.job("lab", j.ID).Reason; !strings.Contains(got, want) {
		t.Fatalf("job reason %q; want it to say %q", got, want)
	}
	gpus := r.statusGPUs()
	if len(gpus) != 4 {
		t.Fatalf("status lists %d GPUs; want 4", len(gpus))
	}
	for _, g := range gpus {
		if holder := map[bool]string{true: "a", false: "b"}[slices.Contains(a, g.ID)]; g.Compute != "lab/gpu"+holder {
			t.Fatalf("status says GPU %s is held by %q; want lab/gpu%s", g.ID, g.Compute, holder)
		}
	}

	if err := r.e.DeleteCompute(context.Background(), "lab", "gpua"); err != nil {
		t.Fatal(err)
	}
	r.settlesTo("the job on c runs", r.status("lab", j.ID, api.JobRunning))
	if got := r.nodeGPUs("gpuc"); !slices.Equal(got, a) {
		t.Fatalf("c got GPUs %v; want the released node's %v", got, a)
	}
	if errs := r.compute("lab", "gpuc").Errors; len(errs) != 0 {
		t.Fatalf("compute errors %+v stay once its node is up", errs)
	}
}

func (r *rig) statusGPUs() []api.GPU { return r.e.Status().GPUs }

// TestGPUsSurviveARestart: the GPUs a node holds are stored with it, so a restarted engine
// hands out the others.
func TestGPUsSurviveARestart(t *testing.T) {
	r := gpuRig(t)
	r.gpuCluster("gpua", "Standard_NC6s_v3", 1)
	r.settlesTo("a up", func() bool { return countState(r.compute("lab", "gpua"), api.NodeIdle) == 1 })
	a := r.nodeGPUs("gpua")
	r.stop()
	r.start()
	r.gpuCluster("gpub", "Standard_NC24s_v3", 1) // 4 GPUs: waits for a's
	r.gpuCluster("gpuc", "Standard_NC6s_v3", 1)
	r.settlesTo("c up, b waiting", func() bool {
		return countState(r.compute("lab", "gpuc"), api.NodeIdle) == 1 && countState(r.compute("lab", "gpub"), api.NodePreparing) == 1
	})
	if c := r.nodeGPUs("gpuc"); len(c) != 1 || slices.Equal(c, a) {
		t.Fatalf("after a restart c got GPUs %v; a holds %v", c, a)
	}
	if got := r.nodeGPUs("gpua"); !slices.Equal(got, a) {
		t.Fatalf("a holds %v after a restart; want %v", got, a)
	}
}

// TestTooManyGPUsAreRefusedAtCreate: a size with more GPUs than the machine has is refused,
// naming the size and the count.
func TestTooManyGPUsAreRefusedAtCreate(t *testing.T) {
	r := gpuRig(t)
	r.workspace("big", map[string]int64{"standardNDSv2Family": 1000})
	_, err := r.e.CreateCompute(context.Background(), "big", api.ComputeSpec{
		Name: "ndbig", VMSize: "Standard_ND40rs_v2", ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1},
	}, "")
	if err == nil || !strings.Contains(err.Error(), `VM size "Standard_ND40rs_v2" has 8 GPUs and this engine's machine has only 4`) {
		t.Fatalf("create of an 8-GPU size on a 4-GPU machine: %v", err)
	}
}

// TestCPUNodesOnAGPUMachineSeeNone: a size without GPUs gets an empty list (the local
// driver hides the machine's GPUs from it); without GPUs on the machine nodes get none.
func TestCPUNodesOnAGPUMachineSeeNone(t *testing.T) {
	r := gpuRig(t)
	r.gpuCluster("cpu", "Standard_DS3_v2", 1)
	r.settlesTo("cpu up", func() bool { return countState(r.compute("lab", "cpu"), api.NodeIdle) == 1 })
	spec, _ := r.drv.Node(r.compute("lab", "cpu").Nodes[0].ID)
	if spec.GPUs == nil || len(spec.GPUs) != 0 {
		t.Fatalf("a CPU node on a GPU machine was given GPUs %#v; want an empty list", spec.GPUs)
	}

	plain := newRig(t)
	plain.workspace("lab", map[string]int64{"standardNCSv3Family": 1000})
	plain.gpuCluster("gpug", "Standard_NC12s_v3", 1)
	plain.settlesTo("g up", func() bool { return countState(plain.compute("lab", "gpug"), api.NodeIdle) == 1 })
	if spec, _ := plain.drv.Node(plain.compute("lab", "gpug").Nodes[0].ID); spec.GPUs != nil {
		t.Fatalf("a machine without GPUs gave a node GPUs %#v", spec.GPUs)
	}
}

// TestIsolatedSizeRunsAlone: a node of an isolated size waits while another local node
// runs, then holds the machine alone.
func TestIsolatedSizeRunsAlone(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", map[string]int64{"standardFSv2Family": 1000})
	r.gpuCluster("cpu", "Standard_DS3_v2", 1)
	r.settlesTo("cpu up", func() bool { return countState(r.compute("lab", "cpu"), api.NodeIdle) == 1 })
	r.gpuCluster("iso", "Standard_F72s_v2", 1)
	r.settlesTo("iso waits", func() bool {
		c := r.compute("lab", "iso")
		return countState(c, api.NodePreparing) == 1 && strings.Contains(c.Nodes[0].Reason, "size Standard_F72s_v2 is isolated and runs alone on this machine")
	})
	if err := r.e.DeleteCompute(context.Background(), "lab", "cpu"); err != nil {
		t.Fatal(err)
	}
	r.settlesTo("iso up", func() bool { return countState(r.compute("lab", "iso"), api.NodeIdle) == 1 })
	r.gpuCluster("other", "Standard_DS3_v2", 1)
	r.settlesTo("other waits", func() bool {
		c := r.compute("lab", "other")
		return countState(c, api.NodePreparing) == 1 && strings.Contains(c.Nodes[0].Reason, "of an isolated size holds this machine alone")
	})
}

// TestUnschedulableNodeSaysWhy: a driver's scheduler message about a created node that
// cannot be placed reaches the node's reason, the job's reason and the compute's errors
// at once, not only "Pending".
func TestUnschedulableNodeSaysWhy(t *testing.T) {
	r := newRigWithDriver(t, 0, fake.Options{CreatePending: true})
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 1, "")
	j := r.submit("lab", "cpu", 1)
	r.settlesTo("node created, pending", func() bool { return countState(r.compute("lab", "cpu"), api.NodePreparing) == 1 })
	const why = "Unschedulable: 0/1 nodes are available: 1 Insufficient cpu."
	node := r.compute("lab", "cpu").Nodes[0].ID
	r.drv.Unschedulable(node, why)
	r.settlesTo("the node says why", func() bool { return r.compute("lab", "cpu").Nodes[0].Reason == why })
	if errs := r.compute("lab", "cpu").Errors; len(errs) == 0 || !strings.Contains(errs[0].Message, why) {
		t.Fatalf("compute errors %+v; want one with %q", errs, why)
	}
	if got := r.job("lab", j.ID).Reason; !strings.Contains(got, why) {
		t.Fatalf("job reason %q; want it to carry %q", got, why)
	}
	r.drv.MakeReady(node)
	r.settlesTo("the job runs once the node is placed", r.status("lab", j.ID, api.JobRunning))
	if errs := r.compute("lab", "cpu").Errors; len(errs) != 0 {
		t.Fatalf("compute errors %+v stay once the node is up", errs)
	}
}
