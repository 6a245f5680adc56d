package client

import (
	"context"
	"net/url"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func endpointsPath(workspace string) string {
	return "/v1/workspaces/" + url.PathEscape(workspace) + "/onlineEndpoints"
}

func endpointPath(workspace, name string) string {
	return endpointsPath(workspace) + "/" + url.PathEscape(name)
}

// ListEndpoints lists a workspace's online endpoints.
func (c *Client) ListEndpoints(ctx context.Context, workspace string) ([]api.Endpoint, error) {
	var out api.EndpointList
	if err := c.send(ctx, request{method: "GET", path: endpointsPath(workspace), retry: true}, &out); err != nil {
		return nil, err
	}
	return out.Endpoints, nil
}

// CreateEndpoint creates an online endpoint and starts its deployments; it returns at once
// (provisioning_state Creating). One idempotency key covers every retry.
func (c *Client) CreateEndpoint(ctx context.Context, workspace string, spec api.EndpointSpec) (*api.Endpoint, error) {
	var out api.Endpoint
	if err := c.send(ctx, request{method: "POST", path: endpointsPath(workspace), body: spec, header: idempotent(), retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetEndpoint returns an online endpoint with its deployments' instances.
func (c *Client) GetEndpoint(ctx context.Context, workspace, name string) (*api.Endpoint, error) {
	var out api.Endpoint
	if err := c.send(ctx, request{method: "GET", path: endpointPath(workspace, name), retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateEndpoint replaces an endpoint's mutable fields; changed deployments roll out.
func (c *Client) UpdateEndpoint(ctx context.Context, workspace, name string, upd api.EndpointUpdate) (*api.Endpoint, error) {
	var out api.Endpoint
	if err := c.send(ctx, request{method: "PUT", path: endpointPath(workspace, name), body: upd, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteEndpoint deletes an endpoint and returns once every instance is confirmed gone.
func (c *Client) DeleteEndpoint(ctx context.Context, workspace, name string) error {
	return c.send(ctx, request{method: "DELETE", path: endpointPath(workspace, name), retry: true}, nil)
}

// GetEndpointKeys returns an endpoint's primary and secondary keys.
func (c *Client) GetEndpointKeys(ctx context.Context, workspace, name string) (*api.EndpointKeys, error) {
	var out api.EndpointKeys
	if err := c.send(ctx, request{method: "GET", path: endpointPath(workspace, name) + "/keys", retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RegenerateEndpointKeys replaces the primary or secondary key and returns both.
func (c *Client) RegenerateEndpointKeys(ctx context.Context, workspace, name, keyType string) (*api.EndpointKeys, error) {
	var out api.EndpointKeys
	// Not retried: a retry after a lost response would replace the key a second time.
	if err := c.send(ctx, request{method: "POST", path: endpointPath(workspace, name) + "/regenerateKeys", body: api.RegenerateKeysRequest{KeyType: keyType}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetEndpointToken issues an AML token for an aml_token endpoint.
func (c *Client) GetEndpointToken(ctx context.Context, workspace, name string) (*api.EndpointToken, error) {
	var out api.EndpointToken
	if err := c.send(ctx, request{method: "GET", path: endpointPath(workspace, name) + "/token", retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
