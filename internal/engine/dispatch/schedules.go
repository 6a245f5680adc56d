package dispatch

import (
	"context"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// mlcompute_schedule records, served by the schedules controller.

func (a *API) CreateSchedule(ctx context.Context, workspace string, spec api.JobScheduleSpec, idempotencyKey string) (*api.JobSchedule, error) {
	return a.c.Schedules.Create(ctx, workspace, spec, idempotencyKey)
}

func (a *API) GetSchedule(ctx context.Context, workspace, name string) (*api.JobSchedule, error) {
	return a.c.Schedules.Get(ctx, workspace, name)
}

func (a *API) ListSchedules(ctx context.Context, workspace string) ([]api.JobSchedule, error) {
	return a.c.Schedules.List(ctx, workspace)
}

func (a *API) UpdateSchedule(ctx context.Context, workspace, name string, upd api.JobScheduleUpdate) (*api.JobSchedule, error) {
	return a.c.Schedules.Update(ctx, workspace, name, upd)
}

func (a *API) DeleteSchedule(ctx context.Context, workspace, name string) error {
	return a.c.Schedules.Delete(ctx, workspace, name)
}
