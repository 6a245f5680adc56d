package endpoints

import (
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
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
