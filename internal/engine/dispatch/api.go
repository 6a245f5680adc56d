// Package dispatch is the engine's API as the server, the status page, the CLI and tests
// call it: each call goes to the controller of its concern. It holds no state, and decides
// only which controller serves a call: a compute's create and update by the compute's
// type, a pipeline job's submit, read and cancel by the pipelines' controller.
package dispatch

import (
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/attached"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/clusters"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/endpoints"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/endpoints/endpointapi"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/environments"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/instances"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/jobs"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/pipelines"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/schedules"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/workspaces"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/history"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/scoring"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// Controllers are what the API's calls go to; the composition root (package engine)
// builds them.
type Controllers struct {
	Store       *store.Store
	Clock       clock.Clock
	Core        *computes.Core
	Workspaces  *workspaces.Controller
	Clusters    *clusters.Controller
	Instances   *instances.Controller
	Attached    *attached.Controller
	Jobs        *jobs.Controller
	Pipelines   *pipelines.Controller
	Endpoints   *endpoints.Controller
	EndpointAPI *endpointapi.API
	Scoring     *scoring.Front
	Envs        *environments.Controller
	Schedules   *schedules.Controller
	// History is what the status page plots.
	History *history.History
}

// API is the engine's API. Its methods are safe for concurrent use.
type API struct{ c Controllers }

// New builds the API over c.
func New(c Controllers) *API { return &API{c: c} }

// Sizes lists catalog entries matching f.
func (a *API) Sizes(f api.SizeFilter) []api.VMSize { return catalog.List(f) }

// IsolatedSizes lists the isolated catalog entries.
func (a *API) IsolatedSizes() []api.VMSize { return catalog.Isolated() }
