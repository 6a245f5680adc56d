package engine

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/endpoints"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/metrics"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/leanserver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/scoring"
)

// The online endpoints' API, served by package controllers/endpoints.

// Prober runs one HTTP probe of an endpoint instance (tests give a fake one).
type Prober = endpoints.Prober

// TokenLifetime is how long an aml_token is valid.
const TokenLifetime = scoring.TokenLifetime

func (e *Engine) CreateEndpoint(ctx context.Context, workspace string, spec api.EndpointSpec, idempotencyKey string) (*api.Endpoint, error) {
	return e.endpointAPI.CreateEndpoint(ctx, workspace, spec, idempotencyKey)
}

func (e *Engine) UpdateEndpoint(ctx context.Context, workspace, name string, upd api.EndpointUpdate) (*api.Endpoint, error) {
	return e.endpointAPI.UpdateEndpoint(ctx, workspace, name, upd)
}

func (e *Engine) GetEndpoint(ctx context.Context, workspace, name string) (*api.Endpoint, error) {
	return e.endpointAPI.GetEndpoint(ctx, workspace, name)
}

func (e *Engine) ListEndpoints(ctx context.Context, workspace string) ([]api.Endpoint, error) {
	return e.endpointAPI.ListEndpoints(ctx, workspace)
}

func (e *Engine) DeleteEndpoint(ctx context.Context, workspace, name string) error {
	return e.endpointAPI.DeleteEndpoint(ctx, workspace, name)
}

func (e *Engine) GetEndpointKeys(ctx context.Context, workspace, name string) (*api.EndpointKeys, error) {
	return e.endpointAPI.GetEndpointKeys(ctx, workspace, name)
}

func (e *Engine) RegenerateEndpointKeys(ctx context.Context, workspace, name, keyType string) (*api.EndpointKeys, error) {
	return e.endpointAPI.RegenerateEndpointKeys(ctx, workspace, name, keyType)
}

func (e *Engine) GetEndpointToken(ctx context.Context, workspace, name string) (*api.EndpointToken, error) {
	return e.endpointAPI.GetEndpointToken(ctx, workspace, name)
}

// SetProber replaces the HTTP probe of endpoint instances.
func (e *Engine) SetProber(p Prober) { e.endpoints.SetProber(p) }

// ScoringHandler is the scoring router.
func (e *Engine) ScoringHandler() http.Handler { return e.scoring.Handler() }

// ScoringStats returns the router's counters of an endpoint's deployments.
func (e *Engine) ScoringStats(endpoint string) map[string]router.DeploymentStats {
	return e.scoring.Stats(endpoint)
}

// CloseScoring stops the router's background work; call it after the scoring listener
// stopped.
func (e *Engine) CloseScoring() { e.scoring.Close() }

// ScoringOverTLS makes scoring_uri https://: the scoring listener serves TLS.
func (e *Engine) ScoringOverTLS() { e.scoring.OverTLS() }

// ListenScoring opens the scoring listener (see package scoring).
func (e *Engine) ListenScoring(addr string) (net.Listener, error) {
	return e.scoring.Listen(addr)
}

// ScoringServer is the server of the scoring listener: the router's usual requests on
// event loops, anything else on the lean HTTP/1.1 server, which hands what it does not
// serve to net/http (router.LoopServer, internal/engine/router/leanserver). Every request it
// answers is counted in m.
func (e *Engine) ScoringServer(m *metrics.Metrics, logger hclog.Logger) *router.LoopServer {
	return &router.LoopServer{
		Router:   e.scoring.Router,
		Fallback: &leanserver.Server{Handler: m.Scoring(e.ScoringHandler()), ReadHeaderTimeout: 10 * time.Second},
		Observe:  m.ObserveScoring,
		Logger:   logger,
	}
}
