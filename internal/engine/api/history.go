package api

import "time"

// History is the body of GET /v1/workspaces/{ws}/history: what the engine sampled of each
// compute and online deployment of the workspace over the last hour, oldest point first.
// The engine keeps it in memory from its start; nothing survives a restart.
type History struct {
	// Since is when this engine began sampling: no point is older.
	Since time.Time `json:"since"`
	// IntervalSeconds is the time between two samples.
	IntervalSeconds int64 `json:"interval_seconds"`
	// WindowSeconds is how far back points are kept (one hour).
	WindowSeconds int64               `json:"window_seconds"`
	Computes      []ComputeHistory    `json:"computes"`
	Deployments   []DeploymentHistory `json:"deployments"`
}

// ComputeHistory is one compute's samples.
type ComputeHistory struct {
	Compute string          `json:"compute"`
	Points  []ComputeSample `json:"points"`
}

// ComputeSample is a compute at one time: its nodes in any state, its jobs waiting for
// nodes (Queued), and its jobs on nodes (Preparing or Running).
type ComputeSample struct {
	Time        time.Time `json:"time"`
	Nodes       int64     `json:"nodes"`
	JobsQueued  int64     `json:"jobs_queued"`
	JobsRunning int64     `json:"jobs_running"`
}

// DeploymentHistory is one online deployment's samples.
type DeploymentHistory struct {
	Endpoint   string             `json:"endpoint"`
	Deployment string             `json:"deployment"`
	Points     []DeploymentSample `json:"points"`
}

// DeploymentSample is a deployment at one time: its instances ready for traffic and the
// scoring requests routed to it per second since the previous sample.
type DeploymentSample struct {
	Time        time.Time `json:"time"`
	Instances   int64     `json:"instances"`
	RequestRate float64   `json:"request_rate"`
}
