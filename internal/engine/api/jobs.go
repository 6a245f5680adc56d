package api

import "time"

// Job statuses.
const (
	JobQueued    = "Queued"
	JobPreparing = "Preparing"
	JobRunning   = "Running"
	JobCompleted = "Completed"
	JobFailed    = "Failed"
	JobCanceled  = "Canceled"
)

// ServerlessCompute is the compute name that asks for nodes made for one job alone.
const ServerlessCompute = "serverless"

// JobSpec is a job submission. The code snapshot, when any, is uploaded first
// (POST /v1/workspaces/{ws}/snapshots) and named by its ID.
type JobSpec struct {
	Compute string `json:"compute"`
	// InstanceType is a VM size for --compute serverless, or one of an attached Kubernetes
	// compute's instance types (its default when empty).
	InstanceType  string            `json:"instance_type,omitempty"`
	InstanceCount int64             `json:"instance_count,omitempty"`
	Command       []string          `json:"command"`
	Env           map[string]string `json:"env,omitempty"`
	SnapshotID    string            `json:"snapshot_id,omitempty"`
	// Environment names an environment of the workspace the job runs in (its interpreter
	// first on PATH); empty runs whatever the node's PATH holds.
	Environment string `json:"environment,omitempty"`
}

// Job is a job as the engine holds it.
type Job struct {
	ID        string `json:"id"`
	Workspace string `json:"workspace"`
	Compute   string `json:"compute"`
	// InstanceType is the instance type of a job on an attached Kubernetes compute.
	InstanceType string            `json:"instance_type,omitempty"`
	Status       string            `json:"status"`
	ExitCode     *int              `json:"exit_code,omitempty"`
	Nodes        []string          `json:"nodes"`
	Command      []string          `json:"command"`
	Env          map[string]string `json:"env,omitempty"`
	Count        int64             `json:"instance_count"`
	SnapshotID   string            `json:"snapshot_id,omitempty"`
	// Environment is the environment the job runs in and EnvironmentHash the content hash
	// it was submitted with: a later change of the environment does not change the job's.
	Environment     string `json:"environment,omitempty"`
	EnvironmentHash string `json:"environment_hash,omitempty"`
	Error           string `json:"error,omitempty"`
	// Reason says why a job that has not started yet is waiting (read-only).
	Reason      string     `json:"reason,omitempty"`
	SubmittedAt time.Time  `json:"submitted_at"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	EndedAt     *time.Time `json:"ended_at,omitempty"`
}

// Terminal reports whether a job status is final.
func Terminal(status string) bool {
	return status == JobCompleted || status == JobFailed || status == JobCanceled
}

// JobList is the body of GET /v1/workspaces/{ws}/jobs.
type JobList struct {
	Jobs []Job `json:"jobs"`
}

// LogChunk is the body of GET .../jobs/{job}/logs: output from an offset.
type LogChunk struct {
	Data       []byte `json:"data"`
	NextOffset int64  `json:"next_offset"`
	// Complete is true when the job ended and this rank's output is all there.
	Complete bool `json:"complete"`
}

// Trailers of a followed log stream (GET .../logs?follow=true), whose body is the raw
// output: present only when the job ended and the stream holds all of its output.
const (
	LogCompleteTrailer   = "Mlcompute-Log-Complete"
	LogNextOffsetTrailer = "Mlcompute-Log-Next-Offset"
)

// SnapshotRef is the body returned by POST .../snapshots.
type SnapshotRef struct {
	ID string `json:"id"`
}
