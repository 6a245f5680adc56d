// Package api holds the wire types of the engine's versioned HTTP JSON API. The server and
// the typed client both import it, so the two can never disagree on a field name.
package api

import (
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
)

// Version is the API version; every route lives under /v1.
const Version = "v1"

// IdempotencyKeyHeader carries a client-chosen key on create calls. A create retried with
// the same key (after a dropped connection or an engine crash) returns the object the
// first attempt made instead of failing or making a second one.
const IdempotencyKeyHeader = "Idempotency-Key"

// Status describes a running engine.
type Status struct {
	Version     string    `json:"version"`
	PID         int       `json:"pid"`
	NodesDriver string    `json:"nodes_driver"`
	Locations   []string  `json:"locations"`
	DataDir     string    `json:"data_dir,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	// ScoringURL is the base URL of the online endpoints' scoring router, when it listens.
	ScoringURL string `json:"scoring_url,omitempty"`
	// MinIdleTimeBeforeShutdown is the engine's policy: the shortest
	// idle_time_before_shutdown a compute instance may ask for, in ISO 8601 ('mlcompute
	// serve --min-idle-shutdown'). The provider checks it at plan time.
	MinIdleTimeBeforeShutdown string `json:"min_idle_time_before_shutdown,omitempty"`
	// GPUs are the machine's GPUs local nodes get (mlcompute serve --gpus, --fake-gpus, or
	// found on the machine), each with the node that holds it.
	GPUs []GPU `json:"gpus,omitempty"`
}

// GPU is one of the machine's GPUs and the node that holds it, if any.
type GPU struct {
	ID string `json:"id"`
	// Node is the ID of the node that holds the GPU, and Compute its compute
	// ("<workspace>/<compute>"); both empty when the GPU is free.
	Node    string `json:"node,omitempty"`
	Compute string `json:"compute,omitempty"`
}

// DefaultLocation is the location an engine serves when its operator names none, and a
// workspace's location when its spec names none.
const DefaultLocation = "local"

// WorkspaceSpec is what a user declares for a workspace.
type WorkspaceSpec struct {
	Name        string            `json:"name"`
	Location    string            `json:"location,omitempty"`
	Description string            `json:"description,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
	// Quotas overrides the catalog's default vCPU limit per VM family.
	Quotas map[string]int64 `json:"quotas,omitempty"`
}

// WorkspaceUpdate replaces a workspace's mutable fields. Name and location never change.
type WorkspaceUpdate struct {
	Description string            `json:"description,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
	Quotas      map[string]int64  `json:"quotas,omitempty"`
}

// Workspace is a workspace as the engine holds it.
type Workspace struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Location    string            `json:"location"`
	Description string            `json:"description,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
	Quotas      map[string]int64  `json:"quotas,omitempty"`
	CreatedOn   time.Time         `json:"created_on"`
}

// WorkspaceList is the body of GET /v1/workspaces.
type WorkspaceList struct {
	Workspaces []Workspace `json:"workspaces"`
}

// VMSize is a catalog entry; the catalog's own JSON form is the wire form.
type VMSize = catalog.Size

// SizeFilter selects catalog entries; zero values match everything.
type SizeFilter = catalog.Filter

// SizeList is the body of GET /v1/sizes and GET /v1/sizes/isolated.
type SizeList struct {
	Sizes []VMSize `json:"sizes"`
}
