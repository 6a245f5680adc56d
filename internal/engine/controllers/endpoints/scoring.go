package endpoints

import (
	"context"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// Scoring is the scoring front the composition root owns (package scoring): the
// controller keeps its router's table in step with the store, reads its counters, and has
// it issue and check AML tokens. It binds no socket of its own.
type Scoring interface {
	// BaseURL starts every scoring URI ("http://127.0.0.1:PORT"); "" before the listener
	// is open.
	BaseURL() string
	SetEndpoint(router.Endpoint)
	RemoveEndpoint(name string)
	Stats(endpoint string) map[string]router.DeploymentStats
	InstanceInFlight(endpoint, deployment, id string) (n int64, known bool)
	IssueToken(endpointKey string) (token string, expires time.Time, err error)
	VerifyToken(endpointKey, token string) bool
}

// GetEndpointToken issues an AML token for an aml_token endpoint.
func (c *Controller) GetEndpointToken(_ context.Context, workspace, name string) (*api.EndpointToken, error) {
	var rec model.Endpoint
	err := c.store.View(func(tx *store.Tx) error {
		var err error
		rec, err = model.GetEndpoint(tx, workspace, name)
		return err
	})
	if err != nil {
		return nil, err
	}
	if rec.AuthMode != api.AuthModeAMLToken {
		return nil, api.Errorf(api.CodeInvalid, "auth_mode", "online endpoint %q uses auth_mode %q: read its keys instead, or set auth_mode = %q to use tokens", name, rec.AuthMode, api.AuthModeAMLToken)
	}
	token, expires, err := c.scoring.IssueToken(rec.Key())
	if err != nil {
		return nil, err
	}
	return &api.EndpointToken{AccessToken: token, ExpiresOn: expires}, nil
}
