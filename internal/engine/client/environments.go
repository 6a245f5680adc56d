package client

import (
	"context"
	"net/url"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func environmentsPath(workspace string) string {
	return "/v1/workspaces/" + url.PathEscape(workspace) + "/environments"
}

func environmentPath(workspace, name string) string {
	return environmentsPath(workspace) + "/" + url.PathEscape(name)
}

// ListEnvironments lists a workspace's environments by name.
func (c *Client) ListEnvironments(ctx context.Context, workspace string) ([]api.Environment, error) {
	var out api.EnvironmentList
	if err := c.send(ctx, request{method: "GET", path: environmentsPath(workspace), retry: true}, &out); err != nil {
		return nil, err
	}
	return out.Environments, nil
}

// CreateEnvironment creates an environment. One idempotency key covers every retry.
func (c *Client) CreateEnvironment(ctx context.Context, workspace string, spec api.EnvironmentSpec) (*api.Environment, error) {
	var out api.Environment
	if err := c.send(ctx, request{method: "POST", path: environmentsPath(workspace), body: spec, header: idempotent(), retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetEnvironment returns an environment with its content hash.
func (c *Client) GetEnvironment(ctx context.Context, workspace, name string) (*api.Environment, error) {
	var out api.Environment
	if err := c.send(ctx, request{method: "GET", path: environmentPath(workspace, name), retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateEnvironment replaces an environment's definition; its content hash follows.
func (c *Client) UpdateEnvironment(ctx context.Context, workspace, name string, upd api.EnvironmentUpdate) (*api.Environment, error) {
	var out api.Environment
	if err := c.send(ctx, request{method: "PUT", path: environmentPath(workspace, name), body: upd, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteEnvironment deletes an environment's record.
func (c *Client) DeleteEnvironment(ctx context.Context, workspace, name string) error {
	return c.send(ctx, request{method: "DELETE", path: environmentPath(workspace, name), retry: true}, nil)
}
