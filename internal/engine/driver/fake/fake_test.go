package fake

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

var t0 = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

func newFake() *Driver { return New(clocktesting.NewFakePassiveClock(t0)) }

// nextEvent reads an event that must already be on the channel: the fake emits
// synchronously, so nothing here waits.
func nextEvent(t *testing.T, d *Driver) driver.Event {
	t.Helper()
	select {
	case ev := <-d.Events():
		return ev
	default:
		t.Fatal("no event on the channel")
		return driver.Event{}
	}
}

func noEvent(t *testing.T, d *Driver) {
	t.Helper()
	select {
	case ev := <-d.Events():
		t.Fatalf("unexpected event %+v", ev)
	default:
	}
}

func TestCreateIsIdempotentAndRecorded(t *testing.T) {
	d := newFake()
	ctx := context.Background()
	spec := driver.NodeSpec{Key: "n1", Owner: "ws/c", VMSize: "Standard_DS3_v2", VCPUs: 4}
	a, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a.Address != "127.0.0.1" || !a.StartedAt.Equal(t0) || a.Owner != "ws/c" {
		t.Fatalf("create not idempotent: %+v vs %+v", a, b)
	}
	if got := d.Nodes(); !reflect.DeepEqual(got, []string{"n1"}) {
		t.Fatalf("nodes %v", got)
	}
	if got, ok := d.Node("n1"); !ok || got.VMSize != "Standard_DS3_v2" {
		t.Fatalf("node spec %+v", got)
	}
	want := []Call{{MethodCreate, "n1"}, {MethodCreate, "n1"}}
	if got := d.Calls(); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
}

func TestFailNextFailsOnceInOrder(t *testing.T) {
	d := newFake()
	ctx := context.Background()
	boom1, boom2 := errors.New("boom1"), errors.New("boom2")
	d.FailNext(MethodCreate, boom1)
	d.FailNext(MethodCreate, boom2)
	if _, err := d.Create(ctx, driver.NodeSpec{Key: "n1"}); !errors.Is(err, boom1) {
		t.Fatalf("first: %v", err)
	}
	if _, err := d.Create(ctx, driver.NodeSpec{Key: "n1"}); !errors.Is(err, boom2) {
		t.Fatalf("second: %v", err)
	}
	if len(d.Nodes()) != 0 {
		t.Fatal("a failed create must not create")
	}
	if _, err := d.Create(ctx, driver.NodeSpec{Key: "n1"}); err != nil {
		t.Fatalf("third: %v", err)
	}
	if got := d.CallsTo(MethodCreate); len(got) != 3 {
		t.Fatalf("failed calls are recorded too: %v", got)
	}
	d.FailNext(MethodTerminate, boom1)
	if err := d.Terminate(ctx, "n1"); !errors.Is(err, boom1) {
		t.Fatalf("terminate: %v", err)
	}
	if len(d.Nodes()) != 1 {
		t.Fatal("a failed terminate must not terminate")
	}
}

func TestTasksFinishAndKillEmitTaskExited(t *testing.T) {
	d := newFake()
	ctx := context.Background()
	if _, err := d.Create(ctx, driver.NodeSpec{Key: "n1"}); err != nil {
		t.Fatal(err)
	}
	spec := driver.TaskSpec{Key: "job-1-0", Command: []string{"python", "train.py"}, Env: map[string]string{"RANK": "0"}}
	if err := d.StartTask(ctx, "n1", spec); err != nil {
		t.Fatal(err)
	}
	if err := d.StartTask(ctx, "n1", spec); err != nil {
		t.Fatal(err)
	}
	if got := d.RunningTasks(); !reflect.DeepEqual(got, []string{"n1/job-1-0"}) {
		t.Fatalf("running %v", got)
	}
	task, _ := d.Task("n1", "job-1-0")
	if task.Spec.Env["RANK"] != "0" {
		t.Fatalf("spec not kept: %+v", task.Spec)
	}
	d.AppendOutput("n1", "job-1-0", []byte("epoch 1\n"))
	out, err := d.TaskOutput(ctx, "n1", "job-1-0", 6)
	if err != nil || string(out) != "1\n" {
		t.Fatalf("output %q %v", out, err)
	}

	d.FinishTask("n1", "job-1-0", 3)
	if ev := nextEvent(t, d); ev != (driver.Event{Kind: driver.TaskExited, NodeKey: "n1", TaskKey: "job-1-0", ExitCode: 3}) {
		t.Fatalf("event %+v", ev)
	}
	st, err := d.TaskStatus(ctx, "n1", "job-1-0")
	if err != nil || st.Running || st.ExitCode != 3 {
		t.Fatalf("status %+v %v", st, err)
	}
	// Ending an ended task again says nothing.
	if err := d.KillTask(ctx, "n1", "job-1-0"); err != nil {
		t.Fatal(err)
	}
	noEvent(t, d)

	if err := d.StartTask(ctx, "n1", driver.TaskSpec{Key: "job-2-0", Command: []string{"sleep"}}); err != nil {
		t.Fatal(err)
	}
	if err := d.KillTask(ctx, "n1", "job-2-0"); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, d); ev.Kind != driver.TaskExited || ev.ExitCode != KilledExitCode {
		t.Fatalf("event %+v", ev)
	}
	if _, err := d.TaskStatus(ctx, "n1", "nope"); !driver.IsNotFound(err) {
		t.Fatalf("unknown task: %v", err)
	}
	if err := d.StartTask(ctx, "gone", spec); !driver.IsNotFound(err) {
		t.Fatalf("unknown node: %v", err)
	}
}

func TestKillNodeEmitsNodeGoneAndTerminateDoesNot(t *testing.T) {
	d := newFake()
	ctx := context.Background()
	for _, k := range []string{"n1", "n2"} {
		if _, err := d.Create(ctx, driver.NodeSpec{Key: k, Owner: "ws/c"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.StartTask(ctx, "n1", driver.TaskSpec{Key: "t", Command: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	d.KillNode("n1")
	if ev := nextEvent(t, d); ev != (driver.Event{Kind: driver.NodeGone, NodeKey: "n1"}) {
		t.Fatalf("event %+v", ev)
	}
	noEvent(t, d) // no TaskExited: the tasks went with the node
	if _, err := d.Describe(ctx, "n1"); !driver.IsNotFound(err) {
		t.Fatalf("describe dead node: %v", err)
	}
	if err := d.Terminate(ctx, "n2"); err != nil {
		t.Fatal(err)
	}
	if err := d.Terminate(ctx, "n2"); err != nil {
		t.Fatalf("terminate is idempotent: %v", err)
	}
	noEvent(t, d)
	if len(d.Nodes()) != 0 {
		t.Fatalf("nodes left: %v", d.Nodes())
	}
}

func TestListFiltersByOwner(t *testing.T) {
	d := newFake()
	ctx := context.Background()
	for _, s := range []driver.NodeSpec{{Key: "b", Owner: "ws/c1"}, {Key: "a", Owner: "ws/c1"}, {Key: "c", Owner: "ws/c2"}} {
		if _, err := d.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := d.List(ctx, "ws/c1")
	if err != nil || len(got) != 2 || got[0].Key != "a" || got[1].Key != "b" {
		t.Fatalf("list: %+v %v", got, err)
	}
	all, _ := d.List(ctx, "")
	if len(all) != 3 {
		t.Fatalf("list all: %+v", all)
	}
}

func TestCloseStopsEventsUntilAdopted(t *testing.T) {
	d := newFake()
	ctx := context.Background()
	if _, err := d.Create(ctx, driver.NodeSpec{Key: "n1"}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"t1", "t2"} {
		if err := d.StartTask(ctx, "n1", driver.TaskSpec{Key: k, Command: []string{"x"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d.FinishTask("n1", "t1", 0) // while no engine watches
	noEvent(t, d)

	d.Reopen()
	if _, err := d.Describe(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	st, _ := d.TaskStatus(ctx, "n1", "t1")
	if st.Running {
		t.Fatal("t1 should have ended")
	}
	d.FinishTask("n1", "t2", 1)
	if ev := nextEvent(t, d); ev.TaskKey != "t2" || ev.ExitCode != 1 {
		t.Fatalf("event %+v", ev)
	}
}

func TestEventsBeyondTheBufferArriveInOrder(t *testing.T) {
	d := newFake()
	ctx := context.Background()
	if _, err := d.Create(ctx, driver.NodeSpec{Key: "n1"}); err != nil {
		t.Fatal(err)
	}
	const n = eventBuffer + 10
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("t%d", i)
		if err := d.StartTask(ctx, "n1", driver.TaskSpec{Key: key, Command: []string{"x"}}); err != nil {
			t.Fatal(err)
		}
		d.FinishTask("n1", key, i)
	}
	for i := 0; i < n; i++ {
		select {
		case ev := <-d.Events():
			if ev.ExitCode != i {
				t.Fatalf("event %d has exit code %d", i, ev.ExitCode)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d never arrived", i)
		}
	}
}

func TestContextIsHonoured(t *testing.T) {
	d := newFake()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Create(ctx, driver.NodeSpec{Key: "n1"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
}

func TestPendingNodeBecomesReady(t *testing.T) {
	d := NewWithOptions(clocktesting.NewFakePassiveClock(t0), Options{CreatePending: true, PendingReason: "Priority"})
	ctx := context.Background()
	info, err := d.Create(ctx, driver.NodeSpec{Key: "n1", Owner: "ws/c"})
	if err != nil {
		t.Fatal(err)
	}
	if info.Ready || info.Reason != "Priority" {
		t.Fatalf("created %+v, want pending with reason Priority", info)
	}
	err = d.StartTask(ctx, "n1", driver.TaskSpec{Key: "t", Command: []string{"x"}})
	if !driver.IsTransient(err) {
		t.Fatalf("start on a pending node: %v, want transient", err)
	}
	if _, err := d.Exec(ctx, "n1", driver.ExecSpec{Command: []string{"sh"}}); !driver.IsTransient(err) {
		t.Fatalf("exec on a pending node: %v, want transient", err)
	}
	d.SetPendingReason("n1", "Resources")
	if info, _ := d.Describe(ctx, "n1"); info.Ready || info.Reason != "Resources" {
		t.Fatalf("described %+v, want pending with reason Resources", info)
	}
	noEvent(t, d)
	d.MakeReady("n1")
	if ev := nextEvent(t, d); ev.Kind != driver.NodeReady || ev.NodeKey != "n1" {
		t.Fatalf("event %+v, want NodeReady n1", ev)
	}
	d.MakeReady("n1") // already ready: no second event
	noEvent(t, d)
	if info, _ := d.Describe(ctx, "n1"); !info.Ready || info.Reason != "" {
		t.Fatalf("described %+v, want ready", info)
	}
	if err := d.StartTask(ctx, "n1", driver.TaskSpec{Key: "t", Command: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
}

func TestPendingNodeCanEndByItself(t *testing.T) {
	d := NewWithOptions(nil, Options{CreatePending: true})
	if _, err := d.Create(context.Background(), driver.NodeSpec{Key: "n1"}); err != nil {
		t.Fatal(err)
	}
	d.KillNode("n1") // the allocation ended (time limit, preemption) before it ran
	if ev := nextEvent(t, d); ev.Kind != driver.NodeGone || ev.NodeKey != "n1" {
		t.Fatalf("event %+v, want NodeGone n1", ev)
	}
	if _, err := d.Describe(context.Background(), "n1"); !driver.IsNotFound(err) {
		t.Fatalf("describe: %v, want not found", err)
	}
}

func TestStartOptionEndsTasksAtOnce(t *testing.T) {
	d := NewWithOptions(nil, Options{Start: func(node string, spec driver.TaskSpec) Outcome {
		return Outcome{Output: []byte(node + " ran " + spec.Command[0]), Exited: spec.Command[0] == "quick", ExitCode: 3}
	}})
	ctx := context.Background()
	if _, err := d.Create(ctx, driver.NodeSpec{Key: "n1"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // the second start is a no-op
		if err := d.StartTask(ctx, "n1", driver.TaskSpec{Key: "q", Command: []string{"quick"}}); err != nil {
			t.Fatal(err)
		}
	}
	if ev := nextEvent(t, d); ev.Kind != driver.TaskExited || ev.TaskKey != "q" || ev.ExitCode != 3 {
		t.Fatalf("event %+v, want TaskExited q 3", ev)
	}
	noEvent(t, d)
	if out, _ := d.TaskOutput(ctx, "n1", "q", 0); string(out) != "n1 ran quick" {
		t.Fatalf("output %q", out)
	}
	if err := d.StartTask(ctx, "n1", driver.TaskSpec{Key: "s", Command: []string{"slow"}}); err != nil {
		t.Fatal(err)
	}
	noEvent(t, d)
	if st, _ := d.TaskStatus(ctx, "n1", "s"); !st.Running {
		t.Fatalf("slow task %+v, want running", st)
	}
}

func TestFailNextInjectsEveryKind(t *testing.T) {
	d := newFake()
	ctx := context.Background()
	cause := errors.New("boom")
	kinds := []struct {
		err error
		is  func(error) bool
	}{
		{fmt.Errorf("describing: %w", driver.ErrNotFound), driver.IsNotFound},
		{driver.ErrNoCapacity, driver.IsNoCapacity},
		{driver.Transient(cause), driver.IsTransient},
		{driver.Permanent(cause), driver.IsPermanent},
	}
	for _, k := range kinds {
		d.FailNext(MethodCreate, k.err)
	}
	for i, k := range kinds {
		if _, err := d.Create(ctx, driver.NodeSpec{Key: "n1"}); !k.is(err) {
			t.Fatalf("call %d: %v, want %v", i, err, k.err)
		}
	}
	if _, err := d.Create(ctx, driver.NodeSpec{Key: "n1"}); err != nil {
		t.Fatalf("after the queue: %v", err)
	}
}
