package clusters_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes/computestest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/clusters"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/jobs"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
)

func setup(t *testing.T) (*computestest.Env, *clusters.Controller) {
	t.Helper()
	env := computestest.New(t, computestest.Options{})
	c := clusters.New(env.Core)
	env.Core.RegisterPass(api.TypeComputeCluster, c.Pass)
	env.Workspace("lab", nil)
	return env, c
}

func spec(name string, min, max int64, idle string) api.ComputeSpec {
	return api.ComputeSpec{Name: name, Type: api.TypeComputeCluster, VMSize: "Standard_DS3_v2",
		ScaleSettings: &api.ScaleSettings{MinNodeCount: min, MaxNodeCount: max, ScaleDownNodesAfterIdleDuration: idle}}
}

func states(nodes []model.Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.State)
	}
	return out
}

func TestCreateStoresTheClusterWithDefaults(t *testing.T) {
	env, c := setup(t)
	got, err := c.Create(context.Background(), "lab", api.ComputeSpec{Name: "cpu", VMSize: "Standard_DS3_v2",
		ScaleSettings: &api.ScaleSettings{MaxNodeCount: 2}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got.VMPriority != api.PriorityDedicated || got.State != "Succeeded" {
		t.Fatalf("created = %+v; want a Dedicated cluster, Succeeded", got)
	}
	rec := env.Compute("lab/cpu")
	if rec.Type != api.TypeComputeCluster || rec.ScaleSettings.ScaleDownNodesAfterIdleDuration == "" {
		t.Fatalf("stored = %+v; want a cluster with its idle default", rec)
	}
	if len(env.Driver.Calls()) != 0 {
		t.Fatalf("a cluster of min 0 called the driver: %v", env.Driver.Calls())
	}
}

func TestCreateRefusesBadSettingsNamingTheAttribute(t *testing.T) {
	_, c := setup(t)
	for _, tc := range []struct {
		spec  api.ComputeSpec
		field string
	}{
		{api.ComputeSpec{Name: "cpu", VMSize: "Standard_Nope", ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1}}, "vm_size"},
		{spec("cpu", 3, 2, ""), "scale_settings.min_node_count"},
	} {
		_, err := c.Create(context.Background(), "lab", tc.spec, "")
		var e *api.Error
		if !errors.As(err, &e) || e.Code != api.CodeInvalid || e.Field != tc.field {
			t.Errorf("Create(%+v) = %v; want invalid on %s", tc.spec, err, tc.field)
		}
	}
}

func TestPassScalesToMinAndTheDriverMakesTheNodes(t *testing.T) {
	env, c := setup(t)
	if _, err := c.Create(context.Background(), "lab", spec("cpu", 2, 4, "PT5M"), ""); err != nil {
		t.Fatal(err)
	}
	env.Core.Reconcile(context.Background(), "lab/cpu")
	nodes := env.Nodes("lab/cpu")
	if !slices.Equal(states(nodes), []string{api.NodePreparing, api.NodePreparing}) || !nodes[0].Admitted {
		t.Fatalf("after one pass nodes = %+v; want two admitted preparing nodes", nodes)
	}
	if n := len(env.Driver.CallsTo("Create")); n != 0 {
		t.Fatalf("the driver was called before the commit was acted on: %d creates", n)
	}
	env.Settle()
	if got := env.Driver.CallsTo("Create"); len(got) != 2 {
		t.Fatalf("driver creates = %v; want 2", got)
	}
	if got := states(env.Nodes("lab/cpu")); !slices.Equal(got, []string{api.NodeIdle, api.NodeIdle}) {
		t.Fatalf("node states = %v; want both idle", got)
	}
}

func TestQueuedJobIsPlacedAndIdleNodesGoAfterTheirTime(t *testing.T) {
	env, c := setup(t)
	// The ranks' ends are applied by the jobs' controller, their owner, as in the engine.
	env.Core.RegisterTaskOwner(jobs.New(env.Core, jobs.Config{}))
	if _, err := c.Create(context.Background(), "lab", spec("cpu", 0, 2, "PT10M"), ""); err != nil {
		t.Fatal(err)
	}
	env.PutJob("lab/cpu", "job-00000001", 2)
	env.Core.Kick("lab/cpu")
	env.Settle()
	j := env.Job("lab", "job-00000001")
	if j.Status != api.JobRunning || len(j.Nodes) != 2 {
		t.Fatalf("job = %s on %v; want running on two nodes", j.Status, j.Nodes)
	}
	if got := env.Driver.RunningTasks(); len(got) != 2 {
		t.Fatalf("running tasks = %v; want the job's two ranks", got)
	}
	// The ranks end; the nodes are idle, and released once idle for ten minutes.
	for rank, node := range j.Nodes {
		env.Driver.FinishTask(node, j.TaskKey(rank), 0)
	}
	env.Settle()
	if got := env.Job("lab", j.ID).Status; got != api.JobCompleted {
		t.Fatalf("job after its ranks ended = %s; want completed", got)
	}
	if got := states(env.Nodes("lab/cpu")); !slices.Equal(got, []string{api.NodeIdle, api.NodeIdle}) {
		t.Fatalf("after the job node states = %v; want idle", got)
	}
	env.Step(10*time.Minute - time.Second)
	if len(env.Nodes("lab/cpu")) != 2 || len(env.Driver.CallsTo("Terminate")) != 0 {
		t.Fatal("nodes were released before their idle time")
	}
	env.Step(time.Second)
	if n := env.Nodes("lab/cpu"); len(n) != 0 {
		t.Fatalf("nodes left after their idle time: %+v", n)
	}
	if got := env.Driver.CallsTo("Terminate"); len(got) != 2 {
		t.Fatalf("terminates = %v; want both nodes", got)
	}
}

func TestAJobTooLargeForTheClusterFails(t *testing.T) {
	env, c := setup(t)
	if _, err := c.Create(context.Background(), "lab", spec("cpu", 0, 1, ""), ""); err != nil {
		t.Fatal(err)
	}
	env.PutJob("lab/cpu", "job-00000001", 3)
	env.Core.Reconcile(context.Background(), "lab/cpu")
	j := env.Job("lab", "job-00000001")
	if j.Status != api.JobFailed || j.Error == "" {
		t.Fatalf("job = %s (%q); want failed with the reason", j.Status, j.Error)
	}
}

func TestAFailedCreateBacksOff(t *testing.T) {
	env, c := setup(t)
	if _, err := c.Create(context.Background(), "lab", spec("cpu", 1, 1, ""), ""); err != nil {
		t.Fatal(err)
	}
	env.Driver.FailNext("Create", driver.ErrNoCapacity)
	env.Core.Reconcile(context.Background(), "lab/cpu")
	env.Settle()
	rec := env.Compute("lab/cpu")
	if len(rec.Errors) == 0 || rec.Errors[0].Code != api.ErrorNoCapacity {
		t.Fatalf("compute errors = %+v; want no capacity", rec.Errors)
	}
	// The unusable node was released; no new create until the back-off passes.
	if got := len(env.Driver.CallsTo("Create")); got != 1 {
		t.Fatalf("creates during the back-off = %d; want 1", got)
	}
	env.Step(5 * time.Second)
	if got := len(env.Driver.CallsTo("Create")); got != 2 {
		t.Fatalf("creates after the back-off = %d; want 2", got)
	}
	if got := states(env.Nodes("lab/cpu")); !slices.Equal(got, []string{api.NodeIdle}) {
		t.Fatalf("node states = %v; want one idle node", got)
	}
	if len(env.Compute("lab/cpu").Errors) != 0 {
		t.Fatal("a node that started did not clear the compute's errors")
	}
}

func TestUpdateKeepsTheSize(t *testing.T) {
	env, c := setup(t)
	if _, err := c.Create(context.Background(), "lab", spec("cpu", 0, 1, ""), ""); err != nil {
		t.Fatal(err)
	}
	_, err := c.Update(context.Background(), "lab", "cpu", api.ComputeUpdate{VMSize: "Standard_DS4_v2"})
	var e *api.Error
	if !errors.As(err, &e) || e.Field != "vm_size" {
		t.Fatalf("Update of the size = %v; want invalid on vm_size", err)
	}
	got, err := c.Update(context.Background(), "lab", "cpu", api.ComputeUpdate{Description: "d",
		ScaleSettings: &api.ScaleSettings{MaxNodeCount: 3}})
	if err != nil || got.ScaleSettings.MaxNodeCount != 3 || env.Compute("lab/cpu").Description != "d" {
		t.Fatalf("Update = %+v, %v; want max 3 and the description stored", got, err)
	}
}
