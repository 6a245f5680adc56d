//go:build unix

package slurm

import (
	"slices"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/slurm/slurmtest"
)

func TestSizeArgs(t *testing.T) {
	for _, tc := range []struct {
		spec      driver.NodeSpec
		resources string
		want      []string
	}{
		{driver.NodeSpec{VMSize: "Standard_NC12s_v3", VCPUs: 12, MemoryGB: 224}, ResourcesSize,
			[]string{"--gres=gpu:2", "--cpus-per-task=12", "--mem=229376M"}},
		{driver.NodeSpec{VMSize: "Standard_NC12s_v3", VCPUs: 12, MemoryGB: 224}, ResourcesGPUs, []string{"--gres=gpu:2"}},
		{driver.NodeSpec{VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14}, ResourcesSize, []string{"--cpus-per-task=4", "--mem=14336M"}},
		{driver.NodeSpec{VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14}, ResourcesGPUs, nil},
		{driver.NodeSpec{VMSize: "Standard_F72s_v2", VCPUs: 72, MemoryGB: 144}, ResourcesGPUs, []string{"--exclusive"}},
		{driver.NodeSpec{VMSize: "Standard_NC24rs_v3", VCPUs: 24, MemoryGB: 448}, ResourcesSize,
			[]string{"--gres=gpu:4", "--cpus-per-task=24", "--mem=458752M", "--exclusive"}},
		{driver.NodeSpec{VMSize: "Standard_DS1_v2", VCPUs: 1, MemoryGB: 3.5}, ResourcesSize, []string{"--cpus-per-task=1", "--mem=3584M"}},
		{driver.NodeSpec{}, ResourcesSize, nil},
	} {
		if got := sizeArgs(tc.spec, tc.resources); !slices.Equal(got, tc.want) {
			t.Errorf("sizeArgs(%s, %s) = %q; want %q", tc.spec.VMSize, tc.resources, got, tc.want)
		}
	}
}

// TestSlurmSizes runs the size scenarios on a cluster whose nodes have GRES gpu (fake
// devices, see slurmtest).
func TestSlurmSizes(t *testing.T) {
	c := slurmtest.Start(t)
	t.Run("GPUSizeGetsItsGPUsFromSlurm", func(t *testing.T) { testGPUSize(t, c) })
	t.Run("SizeBiggerThanTheNodesSaysWhy", func(t *testing.T) { testSizeTooBig(t, c) })
}

// testGPUSize: a 1-GPU size's job sees exactly one device, a 2-GPU size's two, both as
// Slurm sets CUDA_VISIBLE_DEVICES.
func testGPUSize(t *testing.T, c *slurmtest.Cluster) {
	d := newTestDriver(t, Config{})
	ctx := ctxT(t)
	for _, tc := range []struct {
		size string
		want int
	}{{"Standard_NC6s_v3", 1}, {"Standard_NC12s_v3", 2}} {
		key := strings.ToLower(strings.TrimPrefix(tc.size, "Standard_"))
		createReady(t, d, driver.NodeSpec{Key: key, Owner: "ws/c", VMSize: tc.size})
		err := d.StartTask(ctx, key, driver.TaskSpec{Key: "gpus", Command: []string{"sh", "-c", `echo "devices=[$CUDA_VISIBLE_DEVICES]"`}})
		if err != nil {
			t.Fatal(err)
		}
		waitEvent(t, d, "the task's end", func(ev driver.Event) bool { return ev.Kind == driver.TaskExited && ev.NodeKey == key })
		out, err := d.TaskOutput(ctx, key, "gpus", 0)
		if err != nil {
			t.Fatal(err)
		}
		_, list, _ := strings.Cut(strings.TrimSpace(string(out)), "devices=[")
		list = strings.TrimSuffix(list, "]")
		if got := strings.Split(list, ","); list == "" || len(got) != tc.want {
			t.Fatalf("%s: the job sees CUDA_VISIBLE_DEVICES %q; want %d device(s) (output %q)", tc.size, list, tc.want, out)
		}
		if err := d.Terminate(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	if jobs := c.Jobs(); len(jobs) > 0 {
		t.Fatalf("squeue shows %v", jobs)
	}
}

// testSizeTooBig: with the size's CPUs and memory asked for, a size larger than every node
// stays pending, and the node says why in Slurm's words (squeue's reason), from Create or
// a NodeWaiting event; Terminate leaves no job.
func testSizeTooBig(t *testing.T, c *slurmtest.Cluster) {
	d := newTestDriver(t, Config{Resources: ResourcesSize})
	ctx := ctxT(t)
	info, err := d.Create(ctx, driver.NodeSpec{Key: "big", Owner: "ws/c", VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14})
	if err != nil || info.Ready {
		t.Fatalf("Create of a 4-vCPU size on 1-CPU nodes: %+v, %v; want a node that is not ready", info, err)
	}
	// Create returns the reason when squeue already had it; else NodeWaiting brings it.
	if info.Reason != "PartitionConfig" {
		ev := waitEvent(t, d, "NodeWaiting of big", func(ev driver.Event) bool { return ev.Kind == driver.NodeWaiting && ev.NodeKey == "big" })
		if ev.Reason != "PartitionConfig" {
			t.Fatalf("NodeWaiting reason %q; want Slurm's PartitionConfig", ev.Reason)
		}
	}
	if info, err = d.Describe(ctx, "big"); err != nil || info.Reason != "PartitionConfig" {
		t.Fatalf("Describe(big) = %+v, %v; want reason PartitionConfig", info, err)
	}
	if err := d.Terminate(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	if jobs := c.Jobs(); len(jobs) > 0 {
		t.Fatalf("squeue shows %v", jobs)
	}
}
