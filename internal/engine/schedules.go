package engine

import (
	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/schedules"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// The engine's use of the schedules' controller (its API calls are package dispatch's). A
// tick's job goes through the engine's own SubmitJob, as a job of `mlcompute job submit
// -f` does: Jobs is the engine, whose API is set before New returns, so before any tick.

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
