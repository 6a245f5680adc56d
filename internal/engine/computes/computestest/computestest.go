// Package computestest builds the compute core for the compute controllers' tests: a real
// store in a temporary directory, a fake clock, the manual work loop and the fake node
// driver. Nothing runs by itself: a test calls a controller, reconciles or settles, and
// checks the stored records and the driver's calls, with no sleep and no poll.
package computestest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/lifecycle"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime/runtimetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store/storetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tasks"
)

// Start is the fake clock's time when a test begins.
var Start = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// Options adjust the core a test gets.
type Options struct {
	// CapacityVCPUs bounds the vCPUs all nodes together may hold; 0 means unlimited.
	CapacityVCPUs int64
	// Fake adjusts the fake driver (nodes created pending, tasks that exit at once).
	Fake fake.Options
	// Artifacts is the store jobs take other jobs' outputs from (nil: none).
	Artifacts *artifacts.Store
}

// Env is a compute core on a manual loop and a fake driver.
type Env struct {
	// Manual is the loop (Settle, Step) and its fake clock.
	runtimetest.Manual
	t         testing.TB
	Store     *store.Store
	Driver    *fake.Driver
	Lifecycle *lifecycle.Nodes
	Core      *computes.Core
	DataDir   string
}

// New builds the core, started on the fake driver, with the store's quota index loaded. The
// test registers its controller's pass with Core.RegisterPass, and its task owners (the
// jobs controller, the instances controller) with Core.RegisterTaskOwner.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	dir := t.TempDir()
	st := storetest.Open(t, dir)
	e := &Env{Manual: runtimetest.Manual{T: t, Clock: clocktesting.NewFakeClock(Start)}, t: t, Store: st, DataDir: dir}
	e.Driver = fake.NewWithOptions(e.Clock, opts.Fake)
	t.Cleanup(func() { _ = e.Driver.Close() })
	e.Loop = runtime.New(runtime.Config{Clock: e.Clock, Manual: true})
	e.Lifecycle = lifecycle.New(lifecycle.Config{Clock: e.Clock, Logger: hclog.NewNullLogger(), Loop: e.Loop})
	taskRunner := tasks.New(e.Loop, hclog.NewNullLogger())
	var seq int
	var err error
	e.Core, err = computes.New(computes.Config{
		Store: st, Clock: e.Clock, Logger: hclog.NewNullLogger(), Loop: e.Loop, DataDir: dir, Nodes: e.Lifecycle, Tasks: taskRunner,
		CapacityVCPUs: opts.CapacityVCPUs, Artifacts: opts.Artifacts,
		NewID: func(prefix string) string { seq++; return fmt.Sprintf("%s-%04d", prefix, seq) },
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Loop.Handle(runtime.Compute, e.Core.Reconcile)
	e.Loop.Watch([]<-chan driver.Event{e.Driver.Events()}, e.Lifecycle.HandleEvent)
	e.Lifecycle.Start(e.Driver)
	taskRunner.Start(context.Background(), e.Driver)
	e.Core.Start(context.Background())
	return e
}

// Recover finds the nodes again as the engine does after a restart (lifecycle.Recover).
func (e *Env) Recover(ctx context.Context) error { return e.Lifecycle.Recover(ctx, e.Core) }

// Workspace stores a workspace with the given quotas (vCPUs per family).
func (e *Env) Workspace(name string, quotas map[string]int64) {
	e.t.Helper()
	storetest.PutWorkspace(e.t, e.Store, name, quotas, Start)
}

// Compute returns a stored compute ("<workspace>/<name>"); the test fails when it is gone.
func (e *Env) Compute(key string) model.Compute {
	e.t.Helper()
	var rec model.Compute
	var ok bool
	if err := e.Store.View(func(tx *store.Tx) (err error) { ok, err = tx.Get(store.Computes, key, &rec); return err }); err != nil || !ok {
		e.t.Fatalf("compute %s: found %v, error %v", key, ok, err)
	}
	return rec
}

// Gone reports whether a compute's record is gone.
func (e *Env) Gone(key string) bool {
	e.t.Helper()
	var ok bool
	if err := e.Store.View(func(tx *store.Tx) (err error) { ok, err = tx.Get(store.Computes, key, &model.Compute{}); return err }); err != nil {
		e.t.Fatal(err)
	}
	return !ok
}

// Nodes returns a compute's stored nodes, in key order.
func (e *Env) Nodes(key string) []model.Node {
	e.t.Helper()
	var nodes []model.Node
	if err := e.Store.View(func(tx *store.Tx) (err error) {
		nodes, err = store.List[model.Node](tx, store.Nodes, key+"/")
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return nodes
}

// PutJob stores a queued job of a compute, as a submission does.
func (e *Env) PutJob(computeKey, id string, count int64) model.Job {
	e.t.Helper()
	j := model.Job{Job: api.Job{
		ID: id, Workspace: model.WorkspaceOf(computeKey), Compute: computeKey[len(model.WorkspaceOf(computeKey))+1:],
		Status: api.JobQueued, Nodes: []string{}, Command: []string{"train"}, Count: count, SubmittedAt: e.Clock.Now().UTC(),
	}, ComputeKey: computeKey}
	if err := e.Store.Update(func(tx *store.Tx) error { return model.PutJob(tx, j) }); err != nil {
		e.t.Fatal(err)
	}
	return j
}

// Job returns a stored job.
func (e *Env) Job(workspace, id string) model.Job {
	e.t.Helper()
	var j model.Job
	var ok bool
	_ = e.Store.View(func(tx *store.Tx) error { j, ok = model.GetJob(tx, workspace, id); return nil })
	if !ok {
		e.t.Fatalf("job %s/%s not found", workspace, id)
	}
	return j
}

// WantError fails the test unless err is an API error with code on field.
func WantError(t testing.TB, err error, code api.ErrorCode, field string) *api.Error {
	t.Helper()
	var e *api.Error
	if !errors.As(err, &e) || e.Code != code || e.Field != field {
		t.Fatalf("error = %v; want %s on %q", err, code, field)
	}
	return e
}
