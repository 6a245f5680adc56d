package api

import (
	"strings"
	"time"
)

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
	// Type is "command" (the default) or "pipeline"; a pipeline's steps are in Pipeline,
	// and Compute and Command stay empty.
	Type     string        `json:"type,omitempty"`
	Pipeline *PipelineSpec `json:"pipeline,omitempty"`
	Compute  string        `json:"compute"`
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
	// Name is the job's ID when given (YAML `name`); empty: the engine picks one.
	Name           string            `json:"name,omitempty"`
	DisplayName    string            `json:"display_name,omitempty"`
	ExperimentName string            `json:"experiment_name,omitempty"`
	Description    string            `json:"description,omitempty"`
	Tags           map[string]string `json:"tags,omitempty"`
	// TimeoutSeconds is limits.timeout: a job still running this long after its command
	// started is stopped and fails (0: no limit).
	TimeoutSeconds int64 `json:"timeout_seconds,omitempty"`
	// Inputs and Outputs are the job's declared inputs and outputs by name. Command may
	// hold ${{inputs.<name>}} and ${{outputs.<name>}}, which the engine replaces with the
	// path on the node (or a literal's value) when it queues the job.
	Inputs  map[string]JobInput  `json:"inputs,omitempty"`
	Outputs map[string]JobOutput `json:"outputs,omitempty"`
	// SubmittedBy is the name of the token that submits the job. The server sets it from
	// the request's token; it never crosses the wire in a spec, so no caller can claim
	// another's name.
	SubmittedBy string `json:"-"`
	// Schedule is the name of the schedule whose tick submits the job. The engine sets it;
	// it never crosses the wire in a spec.
	Schedule string `json:"-"`
}

// Input and output types and modes (Azure ML's names).
const (
	URIFolder    = "uri_folder"
	URIFile      = "uri_file"
	ModeDownload = "download"
	ModeROMount  = "ro_mount"
	ModeUpload   = "upload"
	ModeRWMount  = "rw_mount"
)

// JobInput is one input of a job: a literal (Value set, Type empty), a local path
// uploaded as a snapshot (SnapshotID), or another job's output (Path
// azureml://jobs/<job>/outputs/<output>).
type JobInput struct {
	Type string `json:"type,omitempty"`
	Mode string `json:"mode,omitempty"`
	// Path is the input's azureml:// URI, or the local path it was uploaded from (for
	// people reading the job; the engine reads SnapshotID).
	Path       string  `json:"path,omitempty"`
	SnapshotID string  `json:"snapshot_id,omitempty"`
	Value      *string `json:"value,omitempty"`
	// FileName is the file a uri_file input holds, in its directory on the node.
	FileName string `json:"file_name,omitempty"`
	// Digest, Size and FileCount describe another job's output taken as input (read-only).
	Digest    string `json:"digest,omitempty"`
	Size      int64  `json:"size,omitempty"`
	FileCount int64  `json:"file_count,omitempty"`
}

// JobOutput is one output of a job. Digest, Size and FileCount are set once the job
// Completed and the output is registered (read-only).
type JobOutput struct {
	Type      string `json:"type,omitempty"`
	Mode      string `json:"mode,omitempty"`
	Digest    string `json:"digest,omitempty"`
	Size      int64  `json:"size,omitempty"`
	FileCount int64  `json:"file_count,omitempty"`
}

// Headers of GET .../jobs/{job}/outputs/{output}, whose body is the output as a tar
// archive: the output's manifest digest, its size in bytes and its number of files.
const (
	OutputDigestHeader    = "Mlcompute-Output-Digest"
	OutputSizeHeader      = "Mlcompute-Output-Size"
	OutputFileCountHeader = "Mlcompute-Output-File-Count"
)

// JobOutputURI is the azureml:// URI of a job's output, as an input's path names it.
func JobOutputURI(job, output string) string { return jobOutputPrefix + job + "/outputs/" + output }

const jobOutputPrefix = "azureml://jobs/"

// ParseJobOutputURI splits an azureml://jobs/<job>/outputs/<output> URI; ok is false for
// any other path.
func ParseJobOutputURI(uri string) (job, output string, ok bool) {
	rest, found := strings.CutPrefix(uri, jobOutputPrefix)
	if !found {
		return "", "", false
	}
	job, output, found = strings.Cut(rest, "/outputs/")
	if !found || job == "" || output == "" || strings.Contains(output, "/") || strings.Contains(job, "/") {
		return "", "", false
	}
	return job, output, true
}

// Job is a job as the engine holds it.
type Job struct {
	ID string `json:"id"`
	// Type is "pipeline" for a pipeline job (its steps in Steps), empty for a command job.
	Type  string         `json:"type,omitempty"`
	Steps []PipelineStep `json:"steps,omitempty"`
	// Pipeline is the ID of the pipeline job (same workspace) whose step this job runs,
	// and Step the step's name; both empty for a job of its own.
	Pipeline string `json:"pipeline,omitempty"`
	Step     string `json:"step,omitempty"`
	// ReusedFrom is set on a pipeline step's job that reused an earlier run's outputs
	// instead of running: "<pipeline>/<step>" of that run.
	ReusedFrom string `json:"reused_from,omitempty"`
	Workspace  string `json:"workspace"`
	Compute    string `json:"compute"`
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
	Environment     string               `json:"environment,omitempty"`
	EnvironmentHash string               `json:"environment_hash,omitempty"`
	Error           string               `json:"error,omitempty"`
	DisplayName     string               `json:"display_name,omitempty"`
	ExperimentName  string               `json:"experiment_name,omitempty"`
	Description     string               `json:"description,omitempty"`
	Tags            map[string]string    `json:"tags,omitempty"`
	TimeoutSeconds  int64                `json:"timeout_seconds,omitempty"`
	Inputs          map[string]JobInput  `json:"inputs,omitempty"`
	Outputs         map[string]JobOutput `json:"outputs,omitempty"`
	// Reason says why a job that has not started yet is waiting (read-only).
	Reason      string    `json:"reason,omitempty"`
	SubmittedAt time.Time `json:"submitted_at"`
	// SubmittedBy names the token that submitted the job ("local" through an engine's
	// Unix socket without tokens; empty for jobs submitted before tokens had names).
	SubmittedBy string `json:"submitted_by,omitempty"`
	// Schedule names the schedule (same workspace) whose tick submitted the job.
	Schedule  string     `json:"schedule,omitempty"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
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
