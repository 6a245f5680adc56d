package jobs_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes/computestest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/clusters"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/jobs"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// setup builds the jobs' controller on a compute core whose clusters run on the fake driver,
// with a cluster "cpu" of up to two Standard_DS3_v2 nodes (4 vCPUs each) in a workspace
// whose quota is 12 vCPUs of that family.
func setup(t *testing.T) (*computestest.Env, *jobs.Controller) {
	t.Helper()
	return setupWith(t, jobs.Config{})
}

// setupWith is setup with the controller built from cfg.
func setupWith(t *testing.T, cfg jobs.Config) (*computestest.Env, *jobs.Controller) {
	t.Helper()
	env := computestest.New(t, computestest.Options{})
	cl := clusters.New(env.Core)
	env.Core.RegisterPass(api.TypeComputeCluster, cl.Pass)
	c := jobs.New(env.Core, cfg)
	env.Core.RegisterTaskOwner(c)
	env.Workspace("lab", map[string]int64{"standardDSv2Family": 12})
	if _, err := cl.Create(context.Background(), "lab", api.ComputeSpec{Name: "cpu", VMSize: "Standard_DS3_v2",
		ScaleSettings: &api.ScaleSettings{MaxNodeCount: 2, ScaleDownNodesAfterIdleDuration: "PT5M"}}, ""); err != nil {
		t.Fatal(err)
	}
	return env, c
}

func submit(t *testing.T, c *jobs.Controller, spec api.JobSpec, key string) *api.Job {
	t.Helper()
	j, err := c.SubmitJob(context.Background(), "lab", spec, key)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestSubmitRefusesWhatCannotRunNamingTheAttribute(t *testing.T) {
	_, c := setup(t)
	for _, tc := range []struct {
		spec  api.JobSpec
		code  api.ErrorCode
		field string
	}{
		{api.JobSpec{Compute: "cpu"}, api.CodeInvalid, "command"},
		{api.JobSpec{Compute: "cpu", Command: []string{"x"}, InstanceCount: 3}, api.CodeInvalid, "instance_count"},
		{api.JobSpec{Compute: "gpu", Command: []string{"x"}}, api.CodeNotFound, ""},
		{api.JobSpec{Compute: api.ServerlessCompute, Command: []string{"x"}}, api.CodeInvalid, "instance_type"},
		{api.JobSpec{Compute: api.ServerlessCompute, Command: []string{"x"}, InstanceType: "Standard_DS4_v2", InstanceCount: 2}, api.CodeQuotaExceeded, "instance_type"},
	} {
		_, err := c.SubmitJob(context.Background(), "lab", tc.spec, "")
		var e *api.Error
		if !errors.As(err, &e) || e.Code != tc.code || (tc.field != "" && e.Field != tc.field) {
			t.Errorf("SubmitJob(%+v) = %v; want %s on %q", tc.spec, err, tc.code, tc.field)
		}
	}
}

func TestAJobRunsItsRanksAndCompletesWhenAllExit(t *testing.T) {
	env, c := setup(t)
	j := submit(t, c, api.JobSpec{Compute: "cpu", Command: []string{"train"}, InstanceCount: 2}, "key-1")
	if again := submit(t, c, api.JobSpec{Compute: "cpu", Command: []string{"train"}, InstanceCount: 2}, "key-1"); again.ID != j.ID {
		t.Fatalf("a retried submit made job %s; want %s", again.ID, j.ID)
	}
	if got, _ := c.GetJob(context.Background(), "lab", j.ID); got.Reason == "" {
		t.Fatal("a queued job says nothing of why it waits")
	}
	env.Settle()
	rec := env.Job("lab", j.ID)
	if rec.Status != api.JobRunning || len(rec.Nodes) != 2 {
		t.Fatalf("job = %s on %v; want running on two nodes", rec.Status, rec.Nodes)
	}
	task, _ := env.Driver.Task(rec.Nodes[1], rec.TaskKey(1))
	if task.Spec.Env["RANK"] != "1" || task.Spec.Env["WORLD_SIZE"] != "2" || task.Spec.Env["MASTER_PORT"] == "" {
		t.Fatalf("rank 1's environment = %v; want RANK 1 of WORLD_SIZE 2 with a MASTER_PORT", task.Spec.Env)
	}
	env.Driver.AppendOutput(rec.Nodes[0], rec.TaskKey(0), []byte("epoch 1\n"))
	env.Driver.FinishTask(rec.Nodes[0], rec.TaskKey(0), 0)
	env.Settle()
	if got := env.Job("lab", j.ID).Status; got != api.JobRunning {
		t.Fatalf("job after one rank = %s; want still running", got)
	}
	env.Driver.FinishTask(rec.Nodes[1], rec.TaskKey(1), 0)
	env.Settle()
	done := env.Job("lab", j.ID)
	if done.Status != api.JobCompleted || done.ExitCode == nil || *done.ExitCode != 0 {
		t.Fatalf("job = %s (exit %v); want completed with 0", done.Status, done.ExitCode)
	}
	out, _, complete, err := c.JobLogs(context.Background(), "lab", j.ID, 0, 0)
	if err != nil || string(out) != "epoch 1\n" || !complete {
		t.Fatalf("rank 0's log = %q, complete %v, %v; want its saved output", out, complete, err)
	}
}

func TestARankThatFailsFailsTheJobAndKillsTheOthers(t *testing.T) {
	env, c := setup(t)
	j := submit(t, c, api.JobSpec{Compute: "cpu", Command: []string{"train"}, InstanceCount: 2}, "")
	env.Settle()
	rec := env.Job("lab", j.ID)
	env.Driver.FinishTask(rec.Nodes[1], rec.TaskKey(1), 7)
	env.Settle()
	if got := env.Job("lab", j.ID); got.Status != api.JobFailed || *got.ExitCode != 7 {
		t.Fatalf("job = %s; want failed with exit 7", got.Status)
	}
	if got := env.Driver.CallsTo("KillTask"); !slices.Contains(got, rec.Nodes[0]+"/"+rec.TaskKey(0)) {
		t.Fatalf("kills = %v; want rank 0 killed", got)
	}
	if len(env.Driver.RunningTasks()) != 0 {
		t.Fatalf("tasks still running: %v", env.Driver.RunningTasks())
	}
}

func TestCancelStopsARunningJob(t *testing.T) {
	env, c := setup(t)
	j := submit(t, c, api.JobSpec{Compute: "cpu", Command: []string{"train"}}, "")
	env.Settle()
	got, err := c.CancelJob(context.Background(), "lab", j.ID)
	if err != nil || got.Status != api.JobCanceled {
		t.Fatalf("CancelJob = %+v, %v; want canceled", got, err)
	}
	env.Settle()
	if len(env.Driver.RunningTasks()) != 0 {
		t.Fatalf("tasks still running after cancel: %v", env.Driver.RunningTasks())
	}
	if again, err := c.CancelJob(context.Background(), "lab", j.ID); err != nil || again.Status != api.JobCanceled {
		t.Fatalf("a second cancel = %+v, %v; want the job as it is", again, err)
	}
}

func TestAServerlessJobGetsItsOwnComputeThatGoesWithIt(t *testing.T) {
	env, c := setup(t)
	j := submit(t, c, api.JobSpec{Compute: api.ServerlessCompute, InstanceType: "Standard_DS2_v2", Command: []string{"train"}}, "")
	key := "lab/serverless-" + j.ID
	if rec := env.Compute(key); !rec.Serverless || rec.ForJob != j.ID {
		t.Fatalf("serverless compute = %+v", rec)
	}
	env.Settle()
	rec := env.Job("lab", j.ID)
	env.Driver.FinishTask(rec.Nodes[0], rec.TaskKey(0), 0)
	env.Settle()
	if !env.Gone(key) || len(env.Driver.Nodes()) != 0 {
		t.Fatalf("after the job: compute gone %v, driver nodes %v; want both gone", env.Gone(key), env.Driver.Nodes())
	}
}

// A serverless job whose node the driver refuses for good fails at once, naming the
// refusal, and its compute goes; one refused for now (a transient error) waits and gets
// its node on the retry.
func TestAServerlessJobWhoseNodeIsRefusedForGoodFails(t *testing.T) {
	env, c := setup(t)
	env.Driver.FailNext("Create", driver.Permanent(errors.New("not an image: unexpected EOF")))
	j := submit(t, c, api.JobSpec{Compute: api.ServerlessCompute, InstanceType: "Standard_DS2_v2", Command: []string{"train"}}, "")
	env.Settle()
	got := env.Job("lab", j.ID)
	if got.Status != api.JobFailed || !strings.Contains(got.Error, "could not start: not an image") {
		t.Fatalf("job = %s (%q); want failed, naming the refusal", got.Status, got.Error)
	}
	if key := "lab/serverless-" + j.ID; !env.Gone(key) || len(env.Driver.Nodes()) != 0 {
		t.Fatalf("after the refusal: compute gone %v, driver nodes %v; want both gone", env.Gone(key), env.Driver.Nodes())
	}

	env.Driver.FailNext("Create", driver.Transient(errors.New("the API server is busy")))
	k := submit(t, c, api.JobSpec{Compute: api.ServerlessCompute, InstanceType: "Standard_DS2_v2", Command: []string{"train"}}, "")
	env.Settle()
	if got, err := c.GetJob(context.Background(), "lab", k.ID); err != nil || got.Status != api.JobQueued || !strings.Contains(got.Reason, "the API server is busy") {
		t.Fatalf("job after a transient refusal = %+v, %v; want queued, its reason saying why", got, err)
	}
	env.Clock.Step(time.Minute)
	env.Settle()
	if got := env.Job("lab", k.ID); got.Status != api.JobRunning {
		t.Fatalf("job after the retry = %s (%q); want running", got.Status, got.Reason)
	}
}

// TestAJobPastItsTimeoutFailsAndIsStopped: limits.timeout counts from the job's start on
// its nodes; at it the job fails, naming the limit, and its ranks are killed.
func TestAJobPastItsTimeoutFailsAndIsStopped(t *testing.T) {
	env, c := setup(t)
	j := submit(t, c, api.JobSpec{Compute: "cpu", Command: []string{"train"}, InstanceCount: 2, TimeoutSeconds: 60}, "")
	env.Settle()
	rec := env.Job("lab", j.ID)
	if rec.Status != api.JobRunning || rec.TimeoutSeconds != 60 {
		t.Fatalf("job = %s with timeout %d; want running with 60", rec.Status, rec.TimeoutSeconds)
	}
	env.Clock.Step(59 * time.Second)
	env.Settle()
	if got := env.Job("lab", j.ID).Status; got != api.JobRunning {
		t.Fatalf("job 59 s after its start = %s; want still running", got)
	}
	env.Clock.Step(time.Second)
	env.Settle()
	got := env.Job("lab", j.ID)
	if got.Status != api.JobFailed || !strings.Contains(got.Error, "limits.timeout of 1m0s") {
		t.Fatalf("job at its limit = %s (%q); want failed, naming limits.timeout", got.Status, got.Error)
	}
	kills := env.Driver.CallsTo("KillTask")
	for rank, node := range rec.Nodes {
		if !slices.Contains(kills, node+"/"+rec.TaskKey(rank)) {
			t.Errorf("kills = %v; want rank %d killed", kills, rank)
		}
	}
	if len(env.Driver.RunningTasks()) != 0 {
		t.Fatalf("tasks still running after the timeout: %v", env.Driver.RunningTasks())
	}
}

// TestATimeoutCountsFromTheStartNotTheSubmit: the time a job waits for nodes is not its own.
func TestATimeoutCountsFromTheStartNotTheSubmit(t *testing.T) {
	env, c := setup(t)
	first := submit(t, c, api.JobSpec{Compute: "cpu", Command: []string{"a"}, InstanceCount: 2}, "")
	waiting := submit(t, c, api.JobSpec{Compute: "cpu", Command: []string{"b"}, TimeoutSeconds: 60}, "")
	env.Settle()
	if got := env.Job("lab", waiting.ID).Status; got != api.JobQueued {
		t.Fatalf("second job = %s; want queued behind the first", got)
	}
	env.Clock.Step(10 * time.Minute)
	env.Settle()
	if got := env.Job("lab", waiting.ID).Status; got != api.JobQueued {
		t.Fatalf("a queued job after 10 minutes = %s; want still queued (its limit has not started)", got)
	}
	rec := env.Job("lab", first.ID)
	for rank, node := range rec.Nodes {
		env.Driver.FinishTask(node, rec.TaskKey(rank), 0)
	}
	env.Settle()
	if got := env.Job("lab", waiting.ID).Status; got != api.JobRunning {
		t.Fatalf("second job once nodes are free = %s; want running", got)
	}
	env.Clock.Step(30 * time.Second)
	env.Settle()
	if got := env.Job("lab", waiting.ID).Status; got != api.JobRunning {
		t.Fatalf("second job 30 s after its start = %s; want running", got)
	}
	env.Clock.Step(30 * time.Second)
	env.Settle()
	if got := env.Job("lab", waiting.ID).Status; got != api.JobFailed {
		t.Fatalf("second job 60 s after its start = %s; want failed", got)
	}
}

func TestSubmitRefusesATimeoutOutOfRange(t *testing.T) {
	_, c := setup(t)
	for _, s := range []int64{-1, 366 * 24 * 3600} {
		_, err := c.SubmitJob(context.Background(), "lab", api.JobSpec{Compute: "cpu", Command: []string{"x"}, TimeoutSeconds: s}, "")
		_ = computestest.WantError(t, err, api.CodeInvalid, "timeout_seconds")
	}
}
