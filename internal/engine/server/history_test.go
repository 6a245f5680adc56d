package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/history"
)

// GET /v1/workspaces/{ws}/history returns what the engine sampled: a compute's nodes and
// jobs as a job queues, runs and ends, one point per sample.
func TestHistoryOverHTTP(t *testing.T) {
	r := newMetricsRig(t)
	c := newClient(t, r.url, r.token)
	ctx := context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCompute(ctx, "lab", api.ComputeSpec{
		Name: "cpu", Type: api.TypeComputeCluster, VMSize: "Standard_DS3_v2",
		ScaleSettings: &api.ScaleSettings{MinNodeCount: 0, MaxNodeCount: 2, ScaleDownNodesAfterIdleDuration: "PT60S"},
	}); err != nil {
		t.Fatal(err)
	}
	sample := func() {
		t.Helper()
		r.clk.Step(history.Interval)
		if err := r.eng.SampleHistory(ctx); err != nil {
			t.Fatal(err)
		}
	}
	r.settle()
	sample() // no node, no job
	if _, err := c.SubmitJob(ctx, "lab", api.JobSpec{Compute: "cpu", InstanceCount: 1, Command: []string{"train"}}); err != nil {
		t.Fatal(err)
	}
	sample() // queued
	r.settle()
	sample() // running on a node
	running := r.drv.RunningTasks()
	if len(running) != 1 {
		t.Fatalf("running tasks %v; want the job's one", running)
	}
	node, task, _ := strings.Cut(running[0], "/")
	r.drv.FinishTask(node, task, 0)
	r.settle()
	sample() // ended; the node idle

	h, err := c.History(ctx, "lab")
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Computes) != 1 || h.Computes[0].Compute != "cpu" {
		t.Fatalf("history of lab has computes %+v; want cpu", h.Computes)
	}
	want := []api.ComputeSample{{Nodes: 0}, {Nodes: 0, JobsQueued: 1}, {Nodes: 1, JobsRunning: 1}, {Nodes: 1}}
	pts := h.Computes[0].Points
	if len(pts) != len(want) {
		t.Fatalf("cpu has %d points %+v; want %d", len(pts), pts, len(want))
	}
	for i, p := range pts {
		want[i].Time = pts[0].Time.Add(history.Interval * time.Duration(i))
		if p != want[i] {
			t.Errorf("point %d is %+v; want %+v", i, p, want[i])
		}
	}
	if h.IntervalSeconds != 10 || h.WindowSeconds != 3600 || len(h.Deployments) != 0 {
		t.Errorf("history %+v; want a 10 s interval, a one-hour window and no deployments", h)
	}
	if _, err := c.History(ctx, "nope"); !api.IsNotFound(err) {
		t.Fatalf("history of a missing workspace: %v; want not_found", err)
	}
}
