package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// CreateToken makes an API token; the answer holds its secret, which the engine never
// shows again. Not retried: a retry after a create that reached the engine would find the
// name taken, and the secret of the first attempt is lost with its answer.
func (c *Client) CreateToken(ctx context.Context, spec api.TokenSpec) (*api.TokenCreated, error) {
	var out api.TokenCreated
	if err := c.send(ctx, request{method: http.MethodPost, path: "/v1/tokens", body: spec}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListTokens lists the API tokens, without their secrets.
func (c *Client) ListTokens(ctx context.Context) ([]api.Token, error) {
	var out api.TokenList
	if err := c.send(ctx, request{method: http.MethodGet, path: "/v1/tokens", retry: true}, &out); err != nil {
		return nil, err
	}
	return out.Tokens, nil
}

// RevokeToken deletes an API token: it gets 401 from then on.
func (c *Client) RevokeToken(ctx context.Context, name string) error {
	return c.send(ctx, request{method: http.MethodDelete, path: "/v1/tokens/" + url.PathEscape(name), retry: true}, nil)
}

// Audit returns the engine's audit log, oldest entry first.
func (c *Client) Audit(ctx context.Context) ([]api.AuditEntry, error) {
	var out api.AuditList
	if err := c.send(ctx, request{method: http.MethodGet, path: "/v1/audit", retry: true}, &out); err != nil {
		return nil, err
	}
	return out.Entries, nil
}
