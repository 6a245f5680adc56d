package engine

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/schedules"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// The engine's use of the schedules' controller: its wiring, and the API calls of
// mlcompute_schedule. A tick's job goes through the engine's own SubmitJob, as a job of
// `mlcompute job submit -f` does.

func newSchedules(e *Engine, cfg Config, log hclog.Logger) *schedules.Controller {
	c := schedules.New(schedules.Config{
		Store: cfg.Store, Clock: cfg.Clock, Logger: log, Jobs: e, Timers: e.loop,
		Mark: func(key string) { e.loop.Mark(runtime.JobScheduleKey(key)) },
	})
	e.loop.Handle(runtime.JobSchedule, c.Reconcile)
	return c
}

// resumeSchedules has every schedule reconciled once at start: its timer is set again,
// a submission the last engine committed is finished, and a tick missed while the engine
// was down fires once (catch_up "latest").
func (e *Engine) resumeSchedules() {
	for _, key := range e.schedules.Keys() {
		e.loop.Mark(runtime.JobScheduleKey(key))
	}
}

// hasEnabledSchedule reports whether an enabled schedule has a tick ahead.
func (e *Engine) hasEnabledSchedule() bool {
	var ok bool
	_ = e.store.View(func(tx *store.Tx) error {
		var err error
		ok, err = model.HasEnabledSchedule(tx)
		return err
	})
	return ok
}

func (e *Engine) CreateSchedule(ctx context.Context, workspace string, spec api.JobScheduleSpec, idempotencyKey string) (*api.JobSchedule, error) {
	return e.schedules.Create(ctx, workspace, spec, idempotencyKey)
}

func (e *Engine) GetSchedule(ctx context.Context, workspace, name string) (*api.JobSchedule, error) {
	return e.schedules.Get(ctx, workspace, name)
}

func (e *Engine) ListSchedules(ctx context.Context, workspace string) ([]api.JobSchedule, error) {
	return e.schedules.List(ctx, workspace)
}

func (e *Engine) UpdateSchedule(ctx context.Context, workspace, name string, upd api.JobScheduleUpdate) (*api.JobSchedule, error) {
	return e.schedules.Update(ctx, workspace, name, upd)
}

func (e *Engine) DeleteSchedule(ctx context.Context, workspace, name string) error {
	return e.schedules.Delete(ctx, workspace, name)
}
