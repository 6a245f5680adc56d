package client

import (
	"context"
	"net/url"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func schedulesPath(workspace string) string {
	return "/v1/workspaces/" + url.PathEscape(workspace) + "/schedules"
}

func schedulePath(workspace, name string) string {
	return schedulesPath(workspace) + "/" + url.PathEscape(name)
}

// ListSchedules lists a workspace's schedules by name.
func (c *Client) ListSchedules(ctx context.Context, workspace string) ([]api.JobSchedule, error) {
	var out api.JobScheduleList
	if err := c.send(ctx, request{method: "GET", path: schedulesPath(workspace), retry: true}, &out); err != nil {
		return nil, err
	}
	return out.Schedules, nil
}

// CreateSchedule creates a schedule. One idempotency key covers every retry.
func (c *Client) CreateSchedule(ctx context.Context, workspace string, spec api.JobScheduleSpec) (*api.JobSchedule, error) {
	var out api.JobSchedule
	if err := c.send(ctx, request{method: "POST", path: schedulesPath(workspace), body: spec, header: idempotent(), retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetSchedule returns a schedule with its next tick and its last run's status.
func (c *Client) GetSchedule(ctx context.Context, workspace, name string) (*api.JobSchedule, error) {
	var out api.JobSchedule
	if err := c.send(ctx, request{method: "GET", path: schedulePath(workspace, name), retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateSchedule replaces a schedule's settings; its next tick is computed anew.
func (c *Client) UpdateSchedule(ctx context.Context, workspace, name string, upd api.JobScheduleUpdate) (*api.JobSchedule, error) {
	var out api.JobSchedule
	if err := c.send(ctx, request{method: "PUT", path: schedulePath(workspace, name), body: upd, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSchedule deletes a schedule; the jobs it started run on.
func (c *Client) DeleteSchedule(ctx context.Context, workspace, name string) error {
	return c.send(ctx, request{method: "DELETE", path: schedulePath(workspace, name), retry: true}, nil)
}
