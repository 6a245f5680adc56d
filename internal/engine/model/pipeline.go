package model

import (
	"strconv"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/reuse"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// PipelineRun is what a pipeline job stores beside its api.Job: its definition as
// submitted and, by step name, what became of each step. It is the pipeline's whole
// state; the steps' jobs hold the rest (their status and outputs).
type PipelineRun struct {
	Spec api.PipelineSpec `json:"spec"`
	// Steps holds a record for each step the pipeline started or decided on.
	Steps map[string]*StepRun `json:"steps,omitempty"`
	// CancelRequested says the user canceled the pipeline: its running steps are
	// canceled, and it ends Canceled once they have.
	CancelRequested bool `json:"cancel_requested,omitempty"`
}

// StepRun is one step's record in its pipeline.
type StepRun struct {
	// Job is the ID of the step's current job, chosen and stored before it is submitted
	// (so a restart submits it again under the same key), empty before the step starts.
	Job string `json:"job,omitempty"`
	// Spec is the step's job as submitted, its bindings resolved.
	Spec *api.JobSpec `json:"spec,omitempty"`
	// Status is set when the pipeline itself ended the step: Skipped, Canceled (it never
	// started), Failed (it could not be submitted). Empty: the step's job says.
	Status string `json:"status,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Key is the step's reuse key ("" when it could not be computed); KeyMissing names
	// the part that could not be.
	Key        string       `json:"key,omitempty"`
	KeyMissing string       `json:"key_missing,omitempty"`
	KeyParts   *reuse.Parts `json:"key_parts,omitempty"`
	// ReusedFrom names the run whose outputs the step reused.
	ReusedFrom string `json:"reused_from,omitempty"`
	// Recorded says the step's completed run is in the reuse index.
	Recorded bool `json:"recorded,omitempty"`
	// Retries counts the runs after failures of the step's own; Requeues the runs after
	// its node was lost (they use no retry).
	Retries  int64 `json:"retries,omitempty"`
	Requeues int64 `json:"requeues,omitempty"`
}

// StepJobID is the ID of a step's job: <pipeline>-<step>, then -retry<N> after its Nth
// retry and -requeue<M> after its Mth requeue (its node lost).
func StepJobID(pipeline, step string, retry, requeue int64) string {
	id := pipeline + "-" + step
	if retry > 0 {
		id += "-retry" + strconv.FormatInt(retry, 10)
	}
	if requeue > 0 {
		id += "-requeue" + strconv.FormatInt(requeue, 10)
	}
	return id
}

// PipelineComputeKey is the compute key of a pipeline job: it runs nothing itself, so it
// is no compute's ("<workspace>/"); the active-jobs index still counts it while it runs.
func PipelineComputeKey(workspace string) string { return workspace + "/" }

// ActivePipelines lists the pipeline jobs that have not ended, by key.
func ActivePipelines(tx *store.Tx) []string {
	var out []string
	for _, k := range tx.Keys(store.ActiveJobs, "") {
		ws, rest, ok := strings.Cut(k, "/")
		if !ok || !strings.HasPrefix(rest, "/") { // "<ws>//<id>": a pipeline's
			continue
		}
		out = append(out, ws+"/"+strings.TrimPrefix(rest, "/"))
	}
	return out
}
