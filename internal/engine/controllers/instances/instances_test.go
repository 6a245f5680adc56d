package instances_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes/computestest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/instances"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/jobs"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
)

const key = "lab/dev"

// setup builds the controller on a compute core with a fake driver and a fake clock; task
// exits go where the engine sends them (setup scripts here, jobs' ranks to the jobs' controller).
func setup(t *testing.T) (*computestest.Env, *instances.Controller) {
	t.Helper()
	env := computestest.New(t, computestest.Options{})
	c := instances.New(instances.Config{Core: env.Core, MinIdleShutdown: time.Minute, DataDir: env.DataDir})
	env.Core.RegisterPass(api.TypeComputeInstance, c.Pass)
	env.Core.RegisterTaskOwner(c)
	env.Core.RegisterTaskOwner(jobs.New(env.Core, jobs.Config{}))
	env.Workspace("lab", nil)
	return env, c
}

func create(t *testing.T, env *computestest.Env, c *instances.Controller, settings *api.InstanceSettings) {
	t.Helper()
	spec := api.ComputeSpec{Name: "dev", Type: api.TypeComputeInstance, VMSize: "Standard_DS3_v2", Instance: settings}
	if _, err := c.Create(context.Background(), "lab", spec, ""); err != nil {
		t.Fatal(err)
	}
	env.Settle()
}

func instance(env *computestest.Env) model.Instance { return *env.Compute(key).Instance }

func liveNode(t *testing.T, env *computestest.Env) model.Node {
	t.Helper()
	for _, n := range env.Nodes(key) {
		if !n.Released {
			return n
		}
	}
	t.Fatal("the instance has no live node")
	return model.Node{}
}

func TestCreateRunsTheStartupScriptThenRuns(t *testing.T) {
	env, c := setup(t)
	create(t, env, c, &api.InstanceSettings{SetupScripts: &api.SetupScripts{StartupScript: &api.SetupScript{Inline: "echo hi"}}})
	inst := instance(env)
	if inst.State != api.InstanceCreating || inst.Stage != "startup" || !inst.StageRunning {
		t.Fatalf("instance = %s at stage %q (running %v); want creating, running its startup script", inst.State, inst.Stage, inst.StageRunning)
	}
	node := liveNode(t, env)
	task, ok := env.Driver.Task(node.ID, "setup-1-startup")
	if !ok || strings.Join(task.Spec.Command, " ") != "sh -c echo hi" || task.Spec.Env["MLCOMPUTE_COMPUTE"] != "dev" {
		t.Fatalf("setup task = %+v, %v; want sh -c of the script, with the compute named", task, ok)
	}
	env.Driver.FinishTask(node.ID, "setup-1-startup", 0)
	env.Settle()
	inst = instance(env)
	if inst.State != api.InstanceRunning || inst.LastOperation.Status != "Succeeded" {
		t.Fatalf("after the script instance = %s, operation %+v; want running, succeeded", inst.State, inst.LastOperation)
	}
	if _, err := os.Stat(env.DataDir + "/instances/lab/dev/setup-1-startup.log"); err != nil {
		t.Fatalf("the script's output was not kept: %v", err)
	}
}

func TestAFailedSetupScriptStopsTheStartAndAStartRunsItAgain(t *testing.T) {
	env, c := setup(t)
	create(t, env, c, &api.InstanceSettings{SetupScripts: &api.SetupScripts{CreationScript: &api.SetupScript{Inline: "exit 3"}}})
	node := liveNode(t, env)
	env.Driver.AppendOutput(node.ID, "setup-1-creation", []byte("pip failed\n"))
	env.Driver.FinishTask(node.ID, "setup-1-creation", 3)
	env.Settle()
	inst := instance(env)
	if inst.State != api.InstanceSetupFailed || !strings.Contains(inst.Error, "creation_script exited with status 3") || !strings.Contains(inst.Error, "pip failed") {
		t.Fatalf("instance = %s (%q); want setup failed naming the script and its last lines", inst.State, inst.Error)
	}
	if _, err := c.InstanceAction(context.Background(), "lab", "dev", api.ActionStart); err != nil {
		t.Fatal(err)
	}
	env.Settle()
	if got := env.Driver.CallsTo("Terminate"); len(got) != 1 || got[0] != node.ID {
		t.Fatalf("terminates = %v; want the failed node released", got)
	}
	fresh := liveNode(t, env)
	if fresh.ID == node.ID {
		t.Fatal("a start after failed setup kept the old node")
	}
	if _, ok := env.Driver.Task(fresh.ID, "setup-2-creation"); !ok {
		t.Fatal("the creation script did not run again on the fresh node")
	}
}

func TestStopReleasesTheNodeAndStartBringsOneBack(t *testing.T) {
	env, c := setup(t)
	create(t, env, c, nil)
	if got := instance(env).State; got != api.InstanceRunning {
		t.Fatalf("instance = %s; want running", got)
	}
	node := liveNode(t, env)
	if _, err := c.InstanceAction(context.Background(), "lab", "dev", api.ActionStop); err != nil {
		t.Fatal(err)
	}
	env.Settle()
	inst := instance(env)
	if inst.State != api.InstanceStopped || inst.LastOperation.Name != "Stop" || inst.LastOperation.Status != "Succeeded" {
		t.Fatalf("instance = %s, operation %+v; want stopped by a succeeded Stop", inst.State, inst.LastOperation)
	}
	if len(env.Nodes(key)) != 0 || len(env.Driver.Nodes()) != 0 {
		t.Fatalf("nodes left after stop: store %v, driver %v", env.Nodes(key), env.Driver.Nodes())
	}
	_, err := c.InstanceAction(context.Background(), "lab", "dev", "reboot")
	var e *api.Error
	if !errors.As(err, &e) || e.Field != "action" {
		t.Fatalf("unknown action = %v; want invalid on action", err)
	}
	if _, err := c.InstanceAction(context.Background(), "lab", "dev", api.ActionStart); err != nil {
		t.Fatal(err)
	}
	env.Settle()
	if got := instance(env); got.State != api.InstanceRunning || liveNode(t, env).ID == node.ID {
		t.Fatalf("after start instance = %s; want running on a new node", got.State)
	}
}

func TestIdleShutdownOnTheFakeClock(t *testing.T) {
	env, c := setup(t)
	create(t, env, c, &api.InstanceSettings{IdleTimeBeforeShutdown: "PT15M"})
	env.Step(14 * time.Minute)
	if got := instance(env).Desired; got != api.InstanceRunning {
		t.Fatalf("desired after 14 idle minutes = %s; want running", got)
	}
	// A session keeps it awake however long it stays open; closing it counts as activity.
	c.OpenSession("lab", "dev")
	env.Step(time.Hour)
	if got := instance(env).Desired; got != api.InstanceRunning {
		t.Fatalf("desired with a session open = %s; want running", got)
	}
	c.CloseSession("lab", "dev")
	env.Step(15*time.Minute - time.Second)
	if got := instance(env).Desired; got != api.InstanceRunning {
		t.Fatalf("desired 1s before the deadline = %s; want running", got)
	}
	env.Step(time.Second)
	inst := instance(env)
	if inst.State != api.InstanceStopped || inst.LastOperation.Trigger != api.TriggerIdleShutdown {
		t.Fatalf("instance = %s by %s; want stopped by idle shutdown", inst.State, inst.LastOperation.Trigger)
	}
}

func TestOneJobAtATimeOnTheNode(t *testing.T) {
	env, c := setup(t)
	create(t, env, c, nil)
	first := env.PutJob(key, "job-00000001", 1)
	env.Clock.Step(time.Second)
	second := env.PutJob(key, "job-00000002", 1)
	env.Core.Kick(key)
	env.Settle()
	if got := instance(env).State; got != api.InstanceJobRunning {
		t.Fatalf("instance = %s; want job running", got)
	}
	if env.Job("lab", first.ID).Status != api.JobRunning || env.Job("lab", second.ID).Status != api.JobQueued {
		t.Fatal("want the first job running and the second queued behind it")
	}
	node := liveNode(t, env)
	env.Driver.FinishTask(node.ID, first.TaskKey(0), 0)
	env.Settle()
	if env.Job("lab", first.ID).Status != api.JobCompleted || env.Job("lab", second.ID).Status != api.JobRunning {
		t.Fatal("want the first job completed and the second running on the node")
	}
}

func TestAScheduledStopFiresAtItsTime(t *testing.T) {
	env, c := setup(t)
	// The fake clock starts on Monday 5 January 2026 at 09:00 UTC.
	create(t, env, c, &api.InstanceSettings{Schedules: []api.Schedule{{Action: "Stop", Cron: "30 9 * * *", TimeZone: "UTC"}}})
	env.Step(29 * time.Minute)
	if got := instance(env).Desired; got != api.InstanceRunning {
		t.Fatalf("desired before the schedule = %s; want running", got)
	}
	env.Step(time.Minute)
	inst := instance(env)
	if inst.State != api.InstanceStopped || inst.LastOperation.Trigger != api.TriggerSchedule {
		t.Fatalf("instance = %s by %s; want stopped by the schedule", inst.State, inst.LastOperation.Trigger)
	}
}

func TestExecRunsOnTheNodeAndCountsAsASession(t *testing.T) {
	env, c := setup(t)
	create(t, env, c, nil)
	var out bytes.Buffer
	code, err := c.Exec(context.Background(), "lab", "dev", []string{"cat"}, strings.NewReader("hello"), &out)
	if err != nil || code != 0 || out.String() != "hello" {
		t.Fatalf("Exec = %d, %v, %q; want 0 and the input echoed", code, err, out.String())
	}
	if _, err := c.Exec(context.Background(), "lab", "dev", nil, nil, &out); err == nil {
		t.Fatal("Exec with no command: want an error")
	}
}
