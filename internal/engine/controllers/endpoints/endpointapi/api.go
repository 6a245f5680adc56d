// Package endpointapi is the online endpoints' API: it validates an endpoint's spec, turns
// it into the stored record (deployments with their generations, environments, models and
// quota holdings), shows records as the API does, and marks endpoints for deletion. The
// endpoints controller (package endpoints) then runs what the records declare: their
// instances, probes, rollouts and the scoring router's table.
//
// The API writes endpoint records in the same turn as every writer of computes and
// endpoints (computes.Turns), so a quota check counts what either holds; a write that
// changes what the router serves gives the controller its table before the commit, as a
// pass does, and the stored one back when it does not commit.
package endpointapi

import (
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// RouterTable is the endpoints controller as the API needs it: the scoring router's table
// it keeps in step with the store. Callers are in turn.
type RouterTable interface {
	// PushRouter gives the router an endpoint's table, before the write that stores it.
	PushRouter(rec model.Endpoint)
	// SyncRouter gives the router the endpoint's stored table again, after a write that
	// pushed its own did not commit.
	SyncRouter(key string)
}

// Scoring is what the API reads of the scoring front (package scoring).
type Scoring interface {
	// BaseURL starts every scoring URI; "" before the listener is open.
	BaseURL() string
	Stats(endpoint string) map[string]router.DeploymentStats
	IssueToken(endpointKey string) (token string, expires time.Time, err error)
}

// Config is what the API is built from.
type Config struct {
	Store     *store.Store
	Clock     clock.Clock
	Logger    hclog.Logger
	Loop      *runtime.Loop
	Snapshots model.SnapshotStore
	// Artifacts is the store of job outputs, which deployments' models can be; nil
	// refuses such a model.
	Artifacts *artifacts.Store
	// Quota is the workspaces' quota sums the computes share: the deployments' holdings
	// (max_instances, or instance_count) are kept in it and checked against it; nil skips
	// the check.
	Quota *model.QuotaIndex
	// NoContainerRuntime says why the engine's nodes of an instance type cannot run
	// container images, or is "" when they can.
	NoContainerRuntime func(instanceType string) string
	Scoring            Scoring
	// Turns is the computes' write path, which the API's writes take turns in.
	Turns computes.Turns
	// Router is the endpoints controller, whose router table a write changes.
	Router RouterTable
}

// API serves the online endpoints' calls; it owns no state but the store's records.
type API struct {
	store     *store.Store
	clock     clock.Clock
	log       hclog.Logger
	loop      *runtime.Loop
	snapshots model.SnapshotStore
	artifacts *artifacts.Store
	quota     *model.QuotaIndex
	noRuntime func(instanceType string) string
	scoring   Scoring
	turns     computes.Turns
	router    RouterTable
}

// New builds the API.
func New(cfg Config) *API {
	return &API{
		store: cfg.Store, clock: cfg.Clock, log: cfg.Logger.Named("endpoints"), loop: cfg.Loop,
		snapshots: cfg.Snapshots, artifacts: cfg.Artifacts, quota: cfg.Quota,
		noRuntime: cfg.NoContainerRuntime, scoring: cfg.Scoring, turns: cfg.Turns, router: cfg.Router,
	}
}

// write commits f in a turn of its own; undo puts back what f changed in memory when the
// transaction does not commit.
func (a *API) write(f func(tx *store.Tx) error, undo func()) error {
	return computes.WriteTurn(a.turns, f, undo)
}

// kick marks an endpoint for the controller's pass.
func (a *API) kick(key string) { a.loop.Mark(runtime.EndpointKey(key)) }
