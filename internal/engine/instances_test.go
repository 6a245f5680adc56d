package engine

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
)

func (r *rig) instance(ws, name string, settings api.InstanceSettings) {
	r.t.Helper()
	_, err := r.e.CreateCompute(context.Background(), ws, api.ComputeSpec{
		Name: name, Type: api.TypeComputeInstance, VMSize: "Standard_DS3_v2", Instance: &settings,
	}, "")
	if err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) state(ws, name, want string) func() bool {
	return func() bool { return r.compute(ws, name).State == want }
}

// finishSetup waits for the setup task of a stage and ends it.
func (r *rig) finishSetup(stage string, code int, output string) {
	r.t.Helper()
	var node, task string
	r.settlesTo("setup task "+stage+" running", func() bool {
		for _, nt := range r.drv.RunningTasks() {
			n, tk, _ := strings.Cut(nt, "/")
			if strings.HasPrefix(tk, "setup-") && strings.HasSuffix(tk, "-"+stage) {
				node, task = n, tk
				return true
			}
		}
		return false
	})
	if output != "" {
		r.drv.AppendOutput(node, task, []byte(output))
	}
	r.drv.FinishTask(node, task, code)
}

func TestInstanceCreateRunsSetupScripts(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.instance("lab", "alice", api.InstanceSettings{SetupScripts: &api.SetupScripts{
		CreationScript: &api.SetupScript{Inline: "pip install torch"},
		StartupScript:  &api.SetupScript{Inline: "echo hello"},
	}})
	if s := r.compute("lab", "alice").State; s != api.InstanceCreating {
		t.Fatalf("state %s right after create; want Creating", s)
	}
	r.finishSetup("creation", 0, "")
	r.finishSetup("startup", 0, "")
	r.settlesTo("running", r.state("lab", "alice", api.InstanceRunning))
	op := r.compute("lab", "alice").LastOperation
	if op.Name != "Create" || op.Status != "Succeeded" || op.Trigger != api.TriggerUser {
		t.Fatalf("last operation %+v", op)
	}

	// A restart runs the startup script again, not the creation script.
	if _, err := r.e.InstanceAction(context.Background(), "lab", "alice", api.ActionRestart); err != nil {
		t.Fatal(err)
	}
	r.finishSetup("startup", 0, "")
	r.settlesTo("running after restart", r.state("lab", "alice", api.InstanceRunning))
	for _, c := range r.drv.Calls() {
		if c.Method == "StartTask" && strings.HasSuffix(c.Key, "setup-2-creation") {
			t.Fatal("the creation script ran again on restart")
		}
	}
}

// The engine stops just as it starts the creation script: the script's start is
// committed, its node never got it. The next engine starts it (and the instance comes up)
// instead of waiting for a task nobody runs, and the stopping engine does not call the
// script failed.
func TestSetupScriptTheEngineStoppedBeforeStartingRunsAfterRestart(t *testing.T) {
	r := newRigWithDriver(t, 0, fake.Options{CreatePending: true})
	r.workspace("lab", nil)
	r.instance("lab", "alice", api.InstanceSettings{SetupScripts: &api.SetupScripts{
		CreationScript: &api.SetupScript{Inline: "pip install torch"},
	}})
	r.settle()
	nodes := r.drv.Nodes()
	if len(nodes) != 1 {
		t.Fatalf("nodes %v; want the instance's one node, pending", nodes)
	}
	// The node becomes ready as the engine stops: the stop cuts the call that starts the
	// creation script short.
	r.drv.FailNext(fake.MethodStartTask, fmt.Errorf("starting task: %w", context.Canceled))
	r.drv.MakeReady(nodes[0])
	r.settle()
	if tasks := r.drv.RunningTasks(); len(tasks) != 0 {
		t.Fatalf("tasks %v started by a stopping engine", tasks)
	}
	if s := r.compute("lab", "alice").State; s != api.InstanceCreating {
		t.Fatalf("state %s after the engine stopped while starting the creation script; want Creating", s)
	}

	r.stop()
	r.start()
	r.finishSetup("creation", 0, "")
	r.settlesTo("running", r.state("lab", "alice", api.InstanceRunning))
	if started := r.drv.CallsTo(fake.MethodStartTask); len(started) != 2 || started[0] != started[1] {
		t.Fatalf("StartTask calls %v; want the same setup task asked for twice (the stopping engine's try, then the new engine's)", started)
	}
}

func TestInstanceSetupFailure(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.instance("lab", "bob", api.InstanceSettings{SetupScripts: &api.SetupScripts{
		CreationScript: &api.SetupScript{Inline: "exit 2"},
	}})
	r.finishSetup("creation", 2, "step 1 ok\nno space left on device\n")
	r.settlesTo("setup failed", r.state("lab", "bob", api.InstanceSetupFailed))
	c := r.compute("lab", "bob")
	if !strings.Contains(c.Error, "creation_script exited with status 2") || !strings.Contains(c.Error, "no space left on device") {
		t.Fatalf("error %q does not name the script and quote its output", c.Error)
	}
	if c.LastOperation.Status != "Failed" {
		t.Fatalf("last operation %+v", c.LastOperation)
	}
}

func TestIdleShutdownJobsSessionsAndReportedActivityKeepAwake(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.instance("lab", "carol", api.InstanceSettings{IdleTimeBeforeShutdown: "PT15M"})
	r.settlesTo("running", r.state("lab", "carol", api.InstanceRunning))

	// A running job keeps it awake.
	j := r.submit("lab", "carol", 1)
	r.settlesTo("job running", r.status("lab", j.ID, api.JobRunning))
	r.settlesTo("JobRunning", r.state("lab", "carol", api.InstanceJobRunning))
	r.clk.Step(time.Hour)
	r.settle()
	if s := r.compute("lab", "carol").State; s != api.InstanceJobRunning {
		t.Fatalf("state %s with a job running; want JobRunning", s)
	}
	got := r.job("lab", j.ID)
	r.drv.FinishTask(got.Nodes[0], r.task("lab", j.ID, 0), 0)
	r.settlesTo("running after the job", r.state("lab", "carol", api.InstanceRunning))

	// An open session keeps it awake; closing it counts as activity.
	r.e.OpenSession("lab", "carol")
	r.clk.Step(time.Hour)
	r.settle()
	if s := r.compute("lab", "carol").State; s != api.InstanceRunning {
		t.Fatalf("state %s with a session open; want Running", s)
	}
	r.e.CloseSession("lab", "carol")

	// Reported activity pushes the deadline.
	r.clk.Step(10 * time.Minute)
	if err := r.e.ReportActivity(context.Background(), "lab", "carol"); err != nil {
		t.Fatal(err)
	}
	r.clk.Step(10 * time.Minute)
	r.settle()
	if s := r.compute("lab", "carol").State; s != api.InstanceRunning {
		t.Fatalf("stopped 10 minutes after reported activity: %s", s)
	}
	r.clk.Step(5*time.Minute - time.Second)
	r.settle()
	if s := r.compute("lab", "carol").State; s != api.InstanceRunning {
		t.Fatalf("stopped 1s before the idle deadline: %s", s)
	}
	r.clk.Step(time.Second)
	r.settlesTo("stopped by idle shutdown", r.state("lab", "carol", api.InstanceStopped))
	if op := r.compute("lab", "carol").LastOperation; op.Trigger != api.TriggerIdleShutdown || op.Name != "Stop" {
		t.Fatalf("last operation %+v; want Stop by IdleShutdown", op)
	}
	if n := len(r.drv.Nodes()); n != 0 {
		t.Fatalf("%d nodes after idle shutdown", n)
	}

	// An update of its arguments never starts it again.
	if _, err := r.e.UpdateCompute(context.Background(), "lab", "carol", api.ComputeUpdate{Description: "changed", Instance: &api.InstanceSettings{IdleTimeBeforeShutdown: "PT15M"}}); err != nil {
		t.Fatal(err)
	}
	r.settle()
	if s := r.compute("lab", "carol").State; s != api.InstanceStopped {
		t.Fatalf("an update restarted the instance: %s", s)
	}
}

func TestShorteningIdleTimeResetsIdleClock(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.instance("lab", "dave", api.InstanceSettings{IdleTimeBeforeShutdown: "PT1H"})
	r.settlesTo("running", r.state("lab", "dave", api.InstanceRunning))
	r.clk.Step(40 * time.Minute)
	if _, err := r.e.UpdateCompute(context.Background(), "lab", "dave", api.ComputeUpdate{Instance: &api.InstanceSettings{IdleTimeBeforeShutdown: "PT30M"}}); err != nil {
		t.Fatal(err)
	}
	r.settle()
	if s := r.compute("lab", "dave").State; s != api.InstanceRunning {
		t.Fatalf("shortening below the idle time stopped it at once: %s", s)
	}
	r.clk.Step(30*time.Minute - time.Second)
	r.settle()
	if s := r.compute("lab", "dave").State; s != api.InstanceRunning {
		t.Fatalf("stopped before the reset clock ran out: %s", s)
	}
	r.clk.Step(time.Second)
	r.settlesTo("stopped 30 minutes after the change", r.state("lab", "dave", api.InstanceStopped))
}

func TestIdleTimeBelowPolicyIsRefused(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	_, err := r.e.CreateCompute(context.Background(), "lab", api.ComputeSpec{
		Name: "erin", Type: api.TypeComputeInstance, VMSize: "Standard_DS3_v2",
		Instance: &api.InstanceSettings{IdleTimeBeforeShutdown: "PT5M"},
	}, "")
	if !api.IsInvalid(err) || api.FieldOf(err) != "instance.idle_time_before_shutdown" || !strings.Contains(err.Error(), "--min-idle-shutdown") {
		t.Fatalf("err = %v (field %q); want the policy named", err, api.FieldOf(err))
	}
}

func TestSchedulesFireAndMissedFiringAppliesOnce(t *testing.T) {
	r := newRig(t) // the fake clock starts at 2026-03-01 12:00 UTC
	r.workspace("lab", nil)
	r.instance("lab", "frank", api.InstanceSettings{Schedules: []api.Schedule{
		{Action: "Stop", Cron: "0 19 * * *"},
		{Action: "Start", Cron: "0 8 * * *"},
	}})
	r.settlesTo("running", r.state("lab", "frank", api.InstanceRunning))
	r.clk.Step(7*time.Hour - time.Second) // 18:59:59
	r.settle()
	if s := r.compute("lab", "frank").State; s != api.InstanceRunning {
		t.Fatalf("stopped before 19:00: %s", s)
	}
	r.clk.Step(time.Second)
	r.settlesTo("stopped at 19:00", r.state("lab", "frank", api.InstanceStopped))
	if op := r.compute("lab", "frank").LastOperation; op.Trigger != api.TriggerSchedule {
		t.Fatalf("last operation %+v; want trigger Schedule", op)
	}
	r.clk.Step(13 * time.Hour) // 08:00 next day
	r.settlesTo("started at 08:00", r.state("lab", "frank", api.InstanceRunning))

	// The engine is down across 19:00; when it comes back the missed Stop applies once.
	r.stop()
	r.clk.Step(12 * time.Hour) // 20:00
	r.start()
	r.settlesTo("missed stop applied", r.state("lab", "frank", api.InstanceStopped))
	if op := r.compute("lab", "frank").LastOperation; op.Trigger != api.TriggerSchedule || op.Name != "Stop" {
		t.Fatalf("last operation %+v", op)
	}
}

func TestResizeStopsResizesAndStartsAgain(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.instance("lab", "gina", api.InstanceSettings{})
	r.settlesTo("running", r.state("lab", "gina", api.InstanceRunning))
	first := r.drv.Nodes()[0]
	if _, err := r.e.UpdateCompute(context.Background(), "lab", "gina", api.ComputeUpdate{VMSize: "standard_ds4_v2"}); err != nil {
		t.Fatal(err)
	}
	r.settlesTo("running on a new node", func() bool {
		nodes := r.drv.Nodes()
		return r.compute("lab", "gina").State == api.InstanceRunning && len(nodes) == 1 && nodes[0] != first
	})
	spec, _ := r.drv.Node(r.drv.Nodes()[0])
	if spec.VMSize != "Standard_DS4_v2" || r.compute("lab", "gina").VMSize != "Standard_DS4_v2" {
		t.Fatalf("node size %s, compute size %s; want Standard_DS4_v2", spec.VMSize, r.compute("lab", "gina").VMSize)
	}

	// A stopped instance stays stopped through a resize.
	if _, err := r.e.InstanceAction(context.Background(), "lab", "gina", api.ActionStop); err != nil {
		t.Fatal(err)
	}
	r.settlesTo("stopped", r.state("lab", "gina", api.InstanceStopped))
	if _, err := r.e.UpdateCompute(context.Background(), "lab", "gina", api.ComputeUpdate{VMSize: "Standard_DS3_v2"}); err != nil {
		t.Fatal(err)
	}
	r.settle()
	if s := r.compute("lab", "gina").State; s != api.InstanceStopped || len(r.drv.Nodes()) != 0 {
		t.Fatalf("resizing a stopped instance started it: %s, %d nodes", s, len(r.drv.Nodes()))
	}
}

func TestSetupScriptTimeout(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.instance("lab", "hank", api.InstanceSettings{SetupScripts: &api.SetupScripts{
		StartupScript: &api.SetupScript{Inline: "sleep 3600", Timeout: "PT10S"},
	}})
	r.settlesTo("startup script running", func() bool { return len(r.drv.RunningTasks()) == 1 })
	r.clk.Step(10*time.Second - time.Millisecond)
	r.settle()
	if s := r.compute("lab", "hank").State; s != api.InstanceCreating {
		t.Fatalf("state %s before the script's timeout; want Creating", s)
	}
	r.clk.Step(time.Millisecond)
	r.settlesTo("setup failed by timeout", r.state("lab", "hank", api.InstanceSetupFailed))
	if c := r.compute("lab", "hank"); !strings.Contains(c.Error, "startup_script timed out") {
		t.Fatalf("error %q; want it to say the startup script timed out", c.Error)
	}
	if n := len(r.drv.RunningTasks()); n != 0 {
		t.Fatalf("%d tasks still running after the timeout", n)
	}
}

// TestEnabledScheduleKeepsEngineUp: an engine whose only instance is stopped still has
// work while a schedule may start it, so it does not exit when idle.
func TestEnabledScheduleKeepsEngineUp(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.instance("lab", "ivan", api.InstanceSettings{Schedules: []api.Schedule{{Action: "Start", Cron: "0 8 * * 1-5"}}})
	r.settlesTo("running", r.state("lab", "ivan", api.InstanceRunning))
	if _, err := r.e.InstanceAction(context.Background(), "lab", "ivan", api.ActionStop); err != nil {
		t.Fatal(err)
	}
	r.settlesTo("stopped", r.state("lab", "ivan", api.InstanceStopped))
	r.settlesTo("node released", func() bool { return len(r.drv.Nodes()) == 0 && len(r.compute("lab", "ivan").Nodes) == 0 })
	if !r.e.HasWork() {
		t.Fatal("an engine with an enabled schedule reports no work: it would exit and the schedule never fire")
	}
	disabled := false
	if _, err := r.e.UpdateCompute(context.Background(), "lab", "ivan", api.ComputeUpdate{Instance: &api.InstanceSettings{
		Schedules: []api.Schedule{{Action: "Start", Cron: "0 8 * * 1-5", Enabled: &disabled}},
	}}); err != nil {
		t.Fatal(err)
	}
	if r.e.HasWork() {
		t.Fatal("a stopped instance with only a disabled schedule still counts as work")
	}
}

// TestSessionEndsWithEngine: an open session's command is stopped when the engine stops.
func TestSessionEndsWithEngine(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.instance("lab", "judy", api.InstanceSettings{})
	r.settlesTo("running", r.state("lab", "judy", api.InstanceRunning))
	stdin, _ := io.Pipe() // never closed: the session would run forever
	done := make(chan error, 1)
	go func() {
		_, err := r.e.Exec(context.Background(), "lab", "judy", []string{"sh"}, stdin, io.Discard)
		done <- err
	}()
	// Exec runs in its own goroutine (a person's session), so this waits in real time.
	r.eventuallyWithin(10*time.Second, "session open", func() bool { return len(r.drv.CallsTo("Exec")) == 1 })
	r.cancel() // the engine stops
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("session ended without an error when the engine stopped")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the session outlived the engine")
	}
}

// TestInstanceCreateErrorsNameInstanceInputs: a quota error on an instance points at its
// vm_size (it has no scale settings), and a taken name tells how to import an instance.
func TestInstanceCreateErrorsNameInstanceInputs(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	_, err := r.e.CreateCompute(context.Background(), "lab", api.ComputeSpec{
		Name: "gpu-box", Type: api.TypeComputeInstance, VMSize: "Standard_NC6s_v3",
	}, "")
	if !api.IsQuotaExceeded(err) || api.FieldOf(err) != "vm_size" {
		t.Fatalf("GPU instance without quota: %v (field %q); want quota_exceeded on vm_size", err, api.FieldOf(err))
	}
	r.instance("lab", "kate", api.InstanceSettings{})
	_, err = r.e.CreateCompute(context.Background(), "lab", api.ComputeSpec{
		Name: "kate", Type: api.TypeComputeInstance, VMSize: "Standard_DS3_v2",
	}, "")
	if !api.IsConflict(err) || !strings.Contains(err.Error(), "terraform import mlcompute_compute_instance.") {
		t.Fatalf("taken name: %v; want the instance import hint", err)
	}
}

// A job longer than idle_time_before_shutdown: the instance stops idle_time_before_shutdown
// after the job ends, not never (the job's end is activity as of that moment).
func TestIdleShutdownAfterAJobLongerThanTheIdleTime(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.instance("lab", "erin", api.InstanceSettings{IdleTimeBeforeShutdown: "PT15M"})
	r.settlesTo("running", r.state("lab", "erin", api.InstanceRunning))

	j := r.submit("lab", "erin", 1)
	r.settlesTo("JobRunning", r.state("lab", "erin", api.InstanceJobRunning))
	r.clk.Step(40 * time.Minute) // far longer than the idle time
	r.settle()
	r.drv.FinishTask(r.job("lab", j.ID).Nodes[0], r.task("lab", j.ID, 0), 0)
	r.settlesTo("running after the job", r.state("lab", "erin", api.InstanceRunning))

	r.clk.Step(15*time.Minute - time.Millisecond)
	r.settle()
	if s := r.compute("lab", "erin").State; s != api.InstanceRunning {
		t.Fatalf("state %s 1ms before the idle deadline after the job; want Running", s)
	}
	r.clk.Step(time.Millisecond)
	r.settlesTo("stopped by idle shutdown after the job", r.state("lab", "erin", api.InstanceStopped))
	if op := r.compute("lab", "erin").LastOperation; op.Trigger != api.TriggerIdleShutdown {
		t.Fatalf("last operation %+v; want trigger IdleShutdown", op)
	}
}

// A user's start of a running instance restarts its idle clock and never stops it.
func TestStartOfARunningInstanceRestartsItsIdleClock(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.instance("lab", "fred", api.InstanceSettings{IdleTimeBeforeShutdown: "PT15M"})
	r.settlesTo("running", r.state("lab", "fred", api.InstanceRunning))

	r.clk.Step(14 * time.Minute)
	r.settle()
	if _, err := r.e.InstanceAction(context.Background(), "lab", "fred", api.ActionStart); err != nil {
		t.Fatal(err)
	}
	r.settle()
	if s := r.compute("lab", "fred").State; s != api.InstanceRunning {
		t.Fatalf("start of a running instance left it %s", s)
	}
	// The old deadline (15 minutes after the first start) passes: still running.
	r.clk.Step(14 * time.Minute)
	r.settle()
	if c := r.compute("lab", "fred"); c.State != api.InstanceRunning {
		t.Fatalf("stopped 14 minutes after a start (%+v); the start must restart the idle clock", c.LastOperation)
	}
	r.clk.Step(time.Minute)
	r.settlesTo("stopped 15 minutes after the start", r.state("lab", "fred", api.InstanceStopped))
}
