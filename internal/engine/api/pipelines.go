package api

import "time"

// Job types: a job runs one command (the default), or is a pipeline of steps, each a
// command job of its own.
const (
	JobTypeCommand  = "command"
	JobTypePipeline = "pipeline"
)

// JobSkipped is the status of a pipeline step that never ran because a step it depends
// on failed (its reason names that step). StepPending is a step that has not started yet.
const (
	JobSkipped  = "Skipped"
	StepPending = "Pending"
)

// PipelineSpec is a pipeline job's submission (JobSpec.Pipeline, with Type "pipeline"):
// its steps, each a command job, bound to the pipeline's inputs and to each other's
// outputs.
type PipelineSpec struct {
	// Inputs are the pipeline's inputs, as a command job's (a literal, an uploaded local
	// path, another job's output); steps take them through InputBindings.
	Inputs map[string]JobInput `json:"inputs,omitempty"`
	// Outputs are the pipeline's outputs; each is registered from the step output bound
	// to it (OutputBindings) when the pipeline ends.
	Outputs map[string]JobOutput `json:"outputs,omitempty"`
	// ContinueOnStepFailure lets branches that do not depend on a failed step run to
	// their end (default false: no other step starts and running steps are canceled).
	ContinueOnStepFailure bool `json:"continue_on_step_failure,omitempty"`
	// ForceRerun runs every step even when an earlier run could be reused.
	ForceRerun bool               `json:"force_rerun,omitempty"`
	Steps      []PipelineStepSpec `json:"steps"`
}

// PipelineStepSpec is one step of a pipeline.
type PipelineStepSpec struct {
	Name string `json:"name"`
	// Job is the step's command job. Its inputs bound to the pipeline are not in
	// Job.Inputs but in InputBindings; its name is the engine's (<pipeline>-<step>).
	Job JobSpec `json:"job"`
	// InputBindings maps an input to where it comes from: "parent.inputs.<name>" or
	// "parent.jobs.<step>.outputs.<output>".
	InputBindings map[string]string `json:"input_bindings,omitempty"`
	// OutputBindings maps a step output to the pipeline output it is registered as.
	OutputBindings map[string]string `json:"output_bindings,omitempty"`
	// IsDeterministic (absent: true) lets the step reuse an earlier run's outputs.
	IsDeterministic *bool `json:"is_deterministic,omitempty"`
	// MaxRetries is retry_settings.max_retries: how many times the step runs again after
	// a failure of its own (a lost node requeues it without using one).
	MaxRetries int64 `json:"max_retries,omitempty"`
	// ForceRerun runs this step even when an earlier run could be reused (job rerun
	// --from: the step named and the steps after it).
	ForceRerun bool `json:"force_rerun,omitempty"`
	// ComputePath and EnvironmentPath say where the step's compute and environment were
	// written ("jobs.train.compute", "settings.default_compute"), so an error names it;
	// absent: jobs.<step>.compute and jobs.<step>.environment.
	ComputePath     string `json:"compute_path,omitempty"`
	EnvironmentPath string `json:"environment_path,omitempty"`
}

// PipelineStep is a step of a pipeline job as the engine reports it (read-only).
type PipelineStep struct {
	Name string `json:"name"`
	// Job is the step's job (<pipeline>-<step>, or with a retry's number), once started.
	Job     string `json:"job,omitempty"`
	Compute string `json:"compute,omitempty"`
	// Status is Pending before the step starts, then its job's status, or Skipped.
	Status string `json:"status"`
	// Reason says why a step was Skipped or Canceled by the pipeline, or why it failed.
	Reason string `json:"reason,omitempty"`
	// ReusedFrom names the run whose outputs a reused step took, "<pipeline>/<step>".
	ReusedFrom string `json:"reused_from,omitempty"`
	// Upstream lists the steps whose outputs this step takes.
	Upstream []string `json:"upstream,omitempty"`
	// InputBindings maps each input bound in the pipeline to where it comes from, as
	// PipelineStepSpec.InputBindings: "parent.inputs.<name>" or
	// "parent.jobs.<step>.outputs.<output>" (the status page draws them as edges).
	InputBindings map[string]string `json:"input_bindings,omitempty"`
	// Retries counts the runs after a failure of its own (retry_settings); Requeues the
	// runs after its node was lost, which use no retry.
	Retries  int64 `json:"retries,omitempty"`
	Requeues int64 `json:"requeues,omitempty"`
	// Key is the step's reuse key once it started ("" when it has none), KeyParts what it
	// was computed from, and KeyMissing the part that could not be computed.
	Key        string         `json:"key,omitempty"`
	KeyParts   *ReuseKeyParts `json:"key_parts,omitempty"`
	KeyMissing string         `json:"key_missing,omitempty"`
	StartedAt  *time.Time     `json:"started_at,omitempty"`
	EndedAt    *time.Time     `json:"ended_at,omitempty"`
}

// ReuseKeyParts are what a step's reuse key is computed from (rules/reuse's Parts): its
// command, environment variables and distribution, its code's and environment's content
// hashes, each file or folder input's content digest, each literal input, and each
// output's declaration. Compute and node count are not among them.
type ReuseKeyParts struct {
	Command         string            `json:"command"`
	Env             map[string]string `json:"environment_variables"`
	Distribution    string            `json:"distribution"`
	CodeHash        string            `json:"code"`
	EnvironmentHash string            `json:"environment"`
	Inputs          map[string]string `json:"inputs"`
	Literals        map[string]string `json:"literals"`
	Outputs         map[string]string `json:"outputs"`
}

// RerunRequest is the body of POST .../jobs/{job}/rerun: a new run of a pipeline job's
// definition, reusing steps by key as any run does. From names a step that runs anew,
// with the steps after it; Force runs every step anew.
type RerunRequest struct {
	From  string `json:"from,omitempty"`
	Force bool   `json:"force,omitempty"`
}
