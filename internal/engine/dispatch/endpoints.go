package dispatch

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/endpoints/serving"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/metrics"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router/leanserver"
)

// Online endpoints: the API calls go to package endpointapi, the probe to the controller,
// and the scoring listener to the scoring front.

func (a *API) CreateEndpoint(ctx context.Context, workspace string, spec api.EndpointSpec, idempotencyKey string) (*api.Endpoint, error) {
	return a.c.EndpointAPI.CreateEndpoint(ctx, workspace, spec, idempotencyKey)
}

func (a *API) UpdateEndpoint(ctx context.Context, workspace, name string, upd api.EndpointUpdate) (*api.Endpoint, error) {
	return a.c.EndpointAPI.UpdateEndpoint(ctx, workspace, name, upd)
}

func (a *API) GetEndpoint(ctx context.Context, workspace, name string) (*api.Endpoint, error) {
	return a.c.EndpointAPI.GetEndpoint(ctx, workspace, name)
}

func (a *API) ListEndpoints(ctx context.Context, workspace string) ([]api.Endpoint, error) {
	return a.c.EndpointAPI.ListEndpoints(ctx, workspace)
}

func (a *API) DeleteEndpoint(ctx context.Context, workspace, name string) error {
	return a.c.EndpointAPI.DeleteEndpoint(ctx, workspace, name)
}

func (a *API) GetEndpointKeys(ctx context.Context, workspace, name string) (*api.EndpointKeys, error) {
	return a.c.EndpointAPI.GetEndpointKeys(ctx, workspace, name)
}

func (a *API) RegenerateEndpointKeys(ctx context.Context, workspace, name, keyType string) (*api.EndpointKeys, error) {
	return a.c.EndpointAPI.RegenerateEndpointKeys(ctx, workspace, name, keyType)
}

func (a *API) GetEndpointToken(ctx context.Context, workspace, name string) (*api.EndpointToken, error) {
	return a.c.EndpointAPI.GetEndpointToken(ctx, workspace, name)
}

// SetProber replaces the HTTP probe of endpoint instances.
func (a *API) SetProber(p serving.Prober) { a.c.Endpoints.SetProber(p) }

// ScoringHandler is the scoring router.
func (a *API) ScoringHandler() http.Handler { return a.c.Scoring.Handler() }

// ScoringStats returns the router's counters of an endpoint's deployments.
func (a *API) ScoringStats(endpoint string) map[string]router.DeploymentStats {
	return a.c.Scoring.Stats(endpoint)
}

// CloseScoring stops the router's background work; call it after the scoring listener
// stopped.
func (a *API) CloseScoring() { a.c.Scoring.Close() }

// ScoringOverTLS makes scoring_uri https://: the scoring listener serves TLS.
func (a *API) ScoringOverTLS() { a.c.Scoring.OverTLS() }

// ListenScoring opens the scoring listener (see package scoring).
func (a *API) ListenScoring(addr string) (net.Listener, error) {
	return a.c.Scoring.Listen(addr)
}

// ScoringServer is the server of the scoring listener: the router's usual requests on
// event loops, anything else on the lean HTTP/1.1 server, which hands what it does not
// serve to net/http (router.LoopServer, internal/engine/router/leanserver). Every request it
// answers is counted in m.
func (a *API) ScoringServer(m *metrics.Metrics, logger hclog.Logger) *router.LoopServer {
	return &router.LoopServer{
		Router:   a.c.Scoring.Router,
		Fallback: &leanserver.Server{Handler: m.Scoring(a.ScoringHandler()), ReadHeaderTimeout: 10 * time.Second},
		Observe:  m.ObserveScoring,
		Logger:   logger,
	}
}
