package lifecycle_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/lifecycle"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
)

// env is the lifecycle on a manual loop and the fake driver, as the engine wires it.
type env struct {
	t     *testing.T
	clock *clocktesting.FakeClock
	loop  *runtime.Loop
	drv   driver.Driver
	fake  *fake.Driver
	nodes *lifecycle.Nodes
}

func newEnv(t *testing.T, opts fake.Options) *env {
	t.Helper()
	e := &env{t: t, clock: clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}
	e.fake = fake.NewWithOptions(e.clock, opts)
	t.Cleanup(func() { _ = e.fake.Close() })
	e.drv = e.fake
	e.loop = runtime.New(runtime.Config{Clock: e.clock, Manual: true})
	e.nodes = lifecycle.New(lifecycle.Config{Clock: e.clock, Logger: hclog.NewNullLogger(), Loop: e.loop})
	e.loop.Watch([]<-chan driver.Event{e.fake.Events()}, e.nodes.HandleEvent)
	e.nodes.Start(e.drv)
	return e
}

func (e *env) settle() {
	e.t.Helper()
	if err := e.loop.Settle(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

// owner records what reaches it, in order: the outcomes of its creates and its events.
type owner struct {
	keys      []string
	log       []string
	recovered bool
}

func (o *owner) HandleNodeEvent(_ context.Context, ev driver.Event) {
	o.log = append(o.log, ev.Kind.String()+" "+ev.NodeKey)
}

func (o *owner) NodeKeys() ([]string, error) { return o.keys, nil }

func (o *owner) Recover(context.Context) error { o.recovered = true; return nil }

func (o *owner) done(key string) func(driver.NodeInfo, error) {
	return func(info driver.NodeInfo, err error) {
		switch {
		case err != nil:
			o.log = append(o.log, "failed "+key)
		case info.Ready:
			o.log = append(o.log, "ready "+key)
		default:
			o.log = append(o.log, "created "+key)
		}
	}
}

func TestCreateRunsOncePerKeyUntilItsOutcomeIsRecorded(t *testing.T) {
	e := newEnv(t, fake.Options{})
	o := &owner{}
	ctx := context.Background()
	if !e.nodes.Create(ctx, o, driver.NodeSpec{Key: "n1"}, o.done("n1")) {
		t.Fatal("the first Create of n1 did not start")
	}
	if e.nodes.Create(ctx, o, driver.NodeSpec{Key: "n1"}, o.done("n1")) {
		t.Fatal("a second Create of n1 started while the first was in flight")
	}
	e.settle()
	if got := e.fake.CallsTo(fake.MethodCreate); !slices.Equal(got, []string{"n1"}) {
		t.Fatalf("driver creates = %v, want one of n1", got)
	}
	if !slices.Equal(o.log, []string{"ready n1"}) {
		t.Fatalf("owner saw %v, want the one outcome", o.log)
	}
	// Once the outcome is recorded the owner may ask again (the driver's Create is
	// idempotent under the key: an owner that lost the node's task starts it again).
	if !e.nodes.Create(ctx, o, driver.NodeSpec{Key: "n1"}, o.done("n1")) {
		t.Fatal("Create of n1 refused after the first one finished")
	}
}

func TestANodeCreatedNotReadyWaitsForTheDriver(t *testing.T) {
	e := newEnv(t, fake.Options{CreatePending: true})
	o := &owner{}
	ctx := context.Background()
	e.nodes.Create(ctx, o, driver.NodeSpec{Key: "q1"}, o.done("q1"))
	e.settle()
	if !e.nodes.Waiting("q1") {
		t.Fatal("a node created not ready is not waiting")
	}
	if e.nodes.Create(ctx, o, driver.NodeSpec{Key: "q1"}, o.done("q1")) {
		t.Fatal("Create started again while the node waits for the driver")
	}
	e.fake.MakeReady("q1")
	e.settle()
	if e.nodes.Waiting("q1") {
		t.Fatal("the node still waits after NodeReady")
	}
	if want := []string{"created q1", "NodeReady q1"}; !slices.Equal(o.log, want) {
		t.Fatalf("owner saw %v, want %v", o.log, want)
	}
}

// readyDuringCreate is a driver whose node becomes ready while Create is still returning
// (a pod scheduled at once, an allocation that starts as it is queued): its NodeReady
// event is on its way before the caller sees the not-ready answer.
type readyDuringCreate struct {
	*fake.Driver
	nodes *lifecycle.Nodes
}

func (d readyDuringCreate) Create(ctx context.Context, spec driver.NodeSpec) (driver.NodeInfo, error) {
	info, err := d.Driver.Create(ctx, spec)
	d.nodes.HandleEvent(ctx, driver.Event{Kind: driver.NodeReady, NodeKey: spec.Key})
	return info, err
}

func TestAnEventDuringCreateReachesTheOwnerAfterTheOutcome(t *testing.T) {
	e := newEnv(t, fake.Options{CreatePending: true})
	e.drv = readyDuringCreate{Driver: e.fake, nodes: e.nodes}
	e.nodes.Start(e.drv)
	o := &owner{}
	e.nodes.Create(context.Background(), o, driver.NodeSpec{Key: "r1"}, o.done("r1"))
	e.settle()
	if want := []string{"created r1", "NodeReady r1"}; !slices.Equal(o.log, want) {
		t.Fatalf("owner saw %v, want the outcome first, then the event", o.log)
	}
	if e.nodes.Waiting("r1") {
		t.Fatal("the node waits for a NodeReady that already came")
	}
}

// retry is the timer a failed release of n1 sets.
var retry = runtime.Timer{Kind: runtime.Retry, Object: runtime.ComputeKey("lab/c"), Sub: "n1"}

func TestReleaseWaitsForCreateAndRetriesAfterAFailure(t *testing.T) {
	e := newEnv(t, fake.Options{})
	o := &owner{}
	ctx := context.Background()
	var gone, after int
	release := func() bool {
		return e.nodes.Release(ctx, "n1", retry, func() error { gone++; return nil }, func() { after++ })
	}
	e.nodes.Create(ctx, o, driver.NodeSpec{Key: "n1"}, o.done("n1"))
	if release() {
		t.Fatal("Release started while the node's Create was in flight")
	}
	e.settle()

	e.fake.FailNext(fake.MethodTerminate, driver.Transient(errors.New("cluster manager busy")))
	if !release() {
		t.Fatal("Release did not start")
	}
	e.settle()
	if gone != 0 || after != 0 {
		t.Fatalf("gone ran %d and after %d times although Terminate failed", gone, after)
	}
	if at, ok := e.loop.TimerDeadline(retry); !ok || !at.Equal(e.clock.Now().Add(runtime.RetryAfter)) {
		t.Fatalf("retry timer = %v (set %v), want RetryAfter from now", at, ok)
	}
	if !e.nodes.Owns("n1") {
		t.Fatal("a node whose release failed is no longer its owner's")
	}

	if !release() {
		t.Fatal("Release did not start again after the failure")
	}
	if release() {
		t.Fatal("a second Release started while one was in flight")
	}
	e.settle()
	if gone != 1 || after != 1 {
		t.Fatalf("gone ran %d and after %d times, want once each", gone, after)
	}
	if e.nodes.Owns("n1") {
		t.Fatal("a released node is still owned: its late events would reach the owner")
	}
}

func TestAFailedGoneKeepsTheNodeForTheNextRelease(t *testing.T) {
	e := newEnv(t, fake.Options{})
	if _, err := e.fake.Create(context.Background(), driver.NodeSpec{Key: "n1"}); err != nil {
		t.Fatal(err)
	}
	e.nodes.Register(&owner{}, "n1")
	after := 0
	e.nodes.Release(context.Background(), "n1", retry, func() error { return errors.New("store closed") }, func() { after++ })
	e.settle()
	if after != 0 || !e.nodes.Owns("n1") {
		t.Fatalf("after ran %d times, owned %v: a node whose record could not be updated must stay its owner's", after, e.nodes.Owns("n1"))
	}
	if _, ok := e.loop.TimerDeadline(retry); !ok {
		t.Fatal("no retry timer after the owner failed to record the release")
	}
}

func TestRecoverRoutesEachOwnersNodesAndReleasesTheRest(t *testing.T) {
	e := newEnv(t, fake.Options{})
	ctx := context.Background()
	for _, k := range []string{"a1", "b1", "orphan"} {
		if _, err := e.fake.Create(ctx, driver.NodeSpec{Key: k}); err != nil {
			t.Fatal(err)
		}
	}
	a, b := &owner{keys: []string{"a1"}}, &owner{keys: []string{"b1", "b-never-created"}}
	if err := e.nodes.Recover(ctx, a, b); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if !a.recovered || !b.recovered {
		t.Fatalf("recovered: a %v, b %v; want both", a.recovered, b.recovered)
	}
	if got := e.fake.CallsTo(fake.MethodTerminate); !slices.Equal(got, []string{"orphan"}) {
		t.Fatalf("terminated %v, want only the orphan", got)
	}
	e.fake.MakeReady("a1") // already ready: no event
	e.nodes.HandleEvent(ctx, driver.Event{Kind: driver.NodeGone, NodeKey: "b1"})
	e.nodes.HandleEvent(ctx, driver.Event{Kind: driver.NodeGone, NodeKey: "a1"})
	e.nodes.HandleEvent(ctx, driver.Event{Kind: driver.NodeGone, NodeKey: "orphan"})
	if !slices.Equal(a.log, []string{"NodeGone a1"}) || !slices.Equal(b.log, []string{"NodeGone b1"}) {
		t.Fatalf("a saw %v and b saw %v; want each its own node's event, and no one the orphan's", a.log, b.log)
	}
}

func TestAdoptAndTaskSayWhatBecameOfARecordedNode(t *testing.T) {
	e := newEnv(t, fake.Options{})
	ctx := context.Background()
	if _, err := e.fake.Create(ctx, driver.NodeSpec{Key: "live"}); err != nil {
		t.Fatal(err)
	}
	if err := e.fake.StartTask(ctx, "live", driver.TaskSpec{Key: "t-running", Command: []string{"serve"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.fake.StartTask(ctx, "live", driver.TaskSpec{Key: "t-done", Command: []string{"train"}}); err != nil {
		t.Fatal(err)
	}
	e.fake.FinishTask("live", "t-done", 3)
	if gone, err := e.nodes.Adopt(ctx, "dead"); err != nil || !gone {
		t.Fatalf("Adopt(dead) = %v, %v; want gone", gone, err)
	}
	if gone, err := e.nodes.Adopt(ctx, "live"); err != nil || gone {
		t.Fatalf("Adopt(live) = %v, %v; want alive", gone, err)
	}
	cases := map[string]lifecycle.TaskState{
		"t-running": {Running: true},
		"t-done":    {ExitCode: 3},
		"t-never":   {NeverStarted: true},
	}
	for task, want := range cases {
		if got, err := e.nodes.Task(ctx, "live", task); err != nil || got != want {
			t.Errorf("Task(%s) = %+v, %v; want %+v", task, got, err, want)
		}
	}
	e.fake.FailNext(fake.MethodDescribe, driver.Transient(errors.New("machine unreachable")))
	if _, err := e.nodes.Adopt(ctx, "live"); err == nil {
		t.Fatal("Adopt hid the driver's error")
	}
}
