package tasks

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/syncbuf"
)

// env is Tasks on a manual loop and a fake driver with one node running one task.
type env struct {
	tasks *Tasks
	loop  *runtime.Loop
	drv   *fake.Driver
	logs  *syncbuf.Buffer
}

func newEnv(t *testing.T) env {
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	drv := fake.New(clk)
	t.Cleanup(func() { _ = drv.Close() })
	loop := runtime.New(runtime.Config{Clock: clk, Manual: true})
	logs := &syncbuf.Buffer{}
	tasks := New(loop, hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}))
	tasks.Start(context.Background(), drv)
	ctx := context.Background()
	if _, err := drv.Create(ctx, driver.NodeSpec{Key: "n1", VMSize: "Standard_DS1_v2", VCPUs: 1, MemoryGB: 3.5}); err != nil {
		t.Fatal(err)
	}
	if err := tasks.StartTask(ctx, "n1", driver.TaskSpec{Key: "job-1", Command: []string{"sleep", "60"}}); err != nil {
		t.Fatal(err)
	}
	return env{tasks: tasks, loop: loop, drv: drv, logs: logs}
}

func TestKillOfAGoneTaskIsNoError(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.tasks.KillTask(ctx, "n1", "never-started"); err != nil {
		t.Fatalf("killing a task the node does not know: %v; want nil", err)
	}
	if err := e.tasks.KillTask(ctx, "gone-node", "job-1"); err != nil {
		t.Fatalf("killing a task on a node that is gone: %v; want nil", err)
	}
	e.drv.FailNext(fake.MethodKillTask, driver.Transient(errors.New("node unreachable")))
	err := e.tasks.KillTask(ctx, "n1", "job-1")
	if err == nil || !driver.IsTransient(err) || !strings.Contains(err.Error(), "killing task job-1 on node n1") {
		t.Fatalf("a kill that failed: %v; want the driver's transient error, naming the task and node", err)
	}
}

func TestKillAfterCommitRunsOnTheLoopAndLogsAFailure(t *testing.T) {
	e := newEnv(t)
	e.tasks.KillAfterCommit("n1", "job-1")
	if task, _ := e.drv.Task("n1", "job-1"); !task.Status.Running {
		t.Fatal("the task was killed before the loop ran the kill")
	}
	if err := e.loop.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if task, _ := e.drv.Task("n1", "job-1"); task.Status.Running || task.Status.ExitCode != fake.KilledExitCode {
		t.Fatalf("task status %+v; want killed", task.Status)
	}
	if strings.Contains(e.logs.String(), "kill failed") {
		t.Fatalf("a kill that worked was logged as failed:\n%s", e.logs.String())
	}

	e.drv.FailNext(fake.MethodKillTask, errors.New("permission denied"))
	e.tasks.KillAfterCommit("n1", "job-1")
	if err := e.loop.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "kill failed") || !strings.Contains(logs, "permission denied") {
		t.Fatalf("a failed kill was not logged with its error:\n%s", logs)
	}
}

func TestWatchOutputOfADriverThatCannotWatch(t *testing.T) {
	e := newEnv(t) // the fake driver does not watch output
	if _, err := e.tasks.WatchOutput(context.Background(), "n1", "job-1"); !driver.IsPermanent(err) {
		t.Fatalf("watching output on a driver that cannot: %v; want a permanent error", err)
	}
}
