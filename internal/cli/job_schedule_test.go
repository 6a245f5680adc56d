package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
)

// `job show` of a scheduled pipeline run whose every step was reused warns on stderr
// (DESIGN 6); the first run, whose step ran, shows no warning.
func TestJobShowWarnsWhenAScheduledRunReusedEveryStep(t *testing.T) {
	e := enginetest.Start(t, enginetest.Options{Fake: fake.Options{Start: func(string, driver.TaskSpec) fake.Outcome {
		return fake.Outcome{Exited: true}
	}}})
	c := e.Client(t, "")
	ctx := context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCompute(ctx, "lab", api.ComputeSpec{Name: "cpu", Type: api.TypeComputeCluster, VMSize: "Standard_DS3_v2",
		ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1}}); err != nil {
		t.Fatal(err)
	}
	pipeline := api.JobSpec{Type: api.JobTypePipeline, Pipeline: &api.PipelineSpec{Steps: []api.PipelineStepSpec{{
		Name: "report", Job: api.JobSpec{Compute: "cpu", Command: []string{"sh", "-c", "echo report"}},
	}}}}
	if _, err := c.CreateSchedule(ctx, "lab", api.JobScheduleSpec{
		Name: "hourly", Trigger: api.JobScheduleTrigger{Type: "cron", Expression: "0 * * * *"},
		CreateJob: "type: pipeline\n", Job: pipeline, Overlap: "allow",
	}); err != nil {
		t.Fatal(err)
	}
	ended := func(id string) *api.Job {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if j, err := c.GetJob(ctx, "lab", id); err == nil && api.Terminal(j.Status) {
				return j
			}
		}
		t.Fatalf("run %s never ended", id)
		return nil
	}
	show := func(id string) (string, string) {
		t.Helper()
		root := NewRootCommand(Config{Use: "mlcompute", Version: "test"})
		var stdout, stderr strings.Builder
		root.SetOut(&stdout)
		root.SetErr(&stderr)
		root.SetArgs([]string{"--endpoint", e.Endpoint, "job", "show", "--workspace", "lab", id})
		if err := root.ExecuteContext(ctx); err != nil {
			t.Fatalf("job show %s: %v", id, err)
		}
		return stdout.String(), stderr.String()
	}

	start := e.Clock.Now()
	first := start.Truncate(time.Hour).Add(time.Hour)
	e.Clock.SetTime(first)
	run1 := ended("hourly-" + first.UTC().Format("20060102T150405Z"))
	e.Clock.SetTime(first.Add(time.Hour))
	run2 := ended("hourly-" + first.Add(time.Hour).UTC().Format("20060102T150405Z"))
	if run1.Status != api.JobCompleted || run2.Status != api.JobCompleted || run2.Steps[0].ReusedFrom == "" {
		t.Fatalf("runs %s %s, second run's step %+v; want both Completed, the second reused", run1.Status, run2.Status, run2.Steps[0])
	}

	out, errOut := show(run1.ID)
	if errOut != "" || !strings.Contains(out, "schedule: hourly") {
		t.Fatalf("first run: stdout %q stderr %q; want the schedule shown and no warning", out, errOut)
	}
	out, errOut = show(run2.ID)
	if !strings.HasPrefix(errOut, "warning: every step of "+run2.ID+", a run of schedule hourly, was reused") {
		t.Fatalf("second run: stderr %q; want the every-step-reused warning", errOut)
	}
	if strings.Contains(out, "warning") {
		t.Fatalf("the warning went to stdout: %q", out)
	}
}
