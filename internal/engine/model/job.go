package model

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// Job is a job as stored, keyed "<workspace>/<id>".
type Job struct {
	api.Job
	// ComputeKey is "<workspace>/<compute record name>" (serverless jobs get their own).
	ComputeKey string      `json:"compute_key"`
	RankExits  map[int]int `json:"rank_exits,omitempty"`
	// MasterPort is MASTER_PORT as rank 0's node gave it (driver TaskPort), committed
	// before any rank of a job of several nodes starts; 0 until then.
	MasterPort int `json:"master_port,omitempty"`
	// Attempt counts the times the job was started; a job whose nodes were preempted goes
	// back to the queue with the next attempt, so exits of the old attempt's tasks are
	// recognised and ignored.
	Attempt int `json:"attempt,omitempty"`
	// EnvDef is the environment the job was submitted with, as it was then (its definition
	// and content hash): later changes of the environment do not touch it.
	EnvDef *JobEnvironment `json:"env_definition,omitempty"`
	// EnvExits are the exit statuses of the environment's preparation tasks by rank (a
	// build, or an interpreter check), for attempt EnvAttempt.
	EnvExits   map[int]int `json:"env_exits,omitempty"`
	EnvAttempt int         `json:"env_attempt,omitempty"`
	// Preparing says what a Preparing job is doing when it is more than starting its
	// tasks ("building environment").
	Preparing string `json:"preparing,omitempty"`
	// PendingOutputs are the outputs rank 0 left, taken into the artifacts store while
	// other ranks still run: Finish registers them (Outputs) when the job ends Completed
	// and drops them at any other end.
	PendingOutputs map[string]api.JobOutput `json:"pending_outputs,omitempty"`
	// NodeLost says the job failed because a node under it was lost (it died, or its
	// allocation ended by itself), not by a failure of its own: a pipeline requeues such a
	// step without using one of its retries.
	NodeLost bool `json:"node_lost,omitempty"`
	// PipelineRun is a pipeline job's definition and its steps' runs (Type "pipeline").
	PipelineRun *PipelineRun `json:"pipeline_run,omitempty"`
}

// EnvTaskPrefix starts the task keys of environment preparation (builds and checks).
const EnvTaskPrefix = "env-"

// EnvTaskKey is the driver key of the environment preparation of one rank of one attempt.
func (j Job) EnvTaskKey(rank int) string { return EnvTaskPrefix + j.TaskKey(rank) }

// EnvReady reports whether every rank's environment preparation of the current attempt
// ended well.
func (j Job) EnvReady() bool {
	if j.EnvAttempt != j.Attempt || int64(len(j.EnvExits)) != j.Count {
		return false
	}
	for _, code := range j.EnvExits {
		if code != 0 {
			return false
		}
	}
	return true
}

// taskKey is the driver key of one rank of one attempt of a job.
func (j Job) TaskKey(rank int) string {
	return fmt.Sprintf("%s.%d-%d", j.ID, j.Attempt, rank)
}

// ParseTaskKey splits a task key into job ID, attempt and rank.
func ParseTaskKey(task string) (jobID string, attempt, rank int, ok bool) {
	dash := strings.LastIndex(task, "-")
	dot := strings.LastIndex(task, ".")
	if dash < 0 || dot < 0 || dot > dash {
		return "", 0, 0, false
	}
	var err1, err2 error
	attempt, err1 = strconv.Atoi(task[dot+1 : dash])
	rank, err2 = strconv.Atoi(task[dash+1:])
	return task[:dot], attempt, rank, err1 == nil && err2 == nil
}

func (j Job) Key() string { return j.Workspace + "/" + j.ID }

// Finish ends a job. Its pending outputs are registered when it ends Completed, and
// dropped otherwise: a job's outputs are registered in the write that completes it.
func (j *Job) Finish(status string, exitCode *int, why string, now time.Time) {
	j.Status, j.ExitCode, j.Error, j.EndedAt = status, exitCode, why, &now
	if status == api.JobCompleted && len(j.PendingOutputs) > 0 {
		j.Outputs = maps.Clone(j.Outputs)
		maps.Copy(j.Outputs, j.PendingOutputs)
	}
	j.PendingOutputs = nil
}

// ArtifactDigests are the manifests of the artifacts store the job keeps from
// collection: its registered outputs, its pending ones, and, until it ends, the outputs
// it takes as inputs.
func (j Job) ArtifactDigests() []string {
	var out []string
	for _, o := range j.Outputs {
		if o.Digest != "" {
			out = append(out, o.Digest)
		}
	}
	for _, o := range j.PendingOutputs {
		out = append(out, o.Digest)
	}
	if !api.Terminal(j.Status) {
		for _, in := range j.Inputs {
			if in.Digest != "" {
				out = append(out, in.Digest)
			}
		}
	}
	return out
}

// ActiveJobs lists the compute's jobs that are not finished, oldest first. It reads the
// active-jobs index (PutJob keeps it), so its cost follows the compute's live jobs, not
// every job the workspace ever ran.
func ActiveJobs(tx *store.Tx, rec Compute) ([]Job, error) {
	return activeJobs(tx, rec, nil)
}

// activeJobs is ActiveJobs without the jobs whose IDs skip holds.
func activeJobs(tx *store.Tx, rec Compute, skip map[string]bool) ([]Job, error) {
	var out []Job
	for _, k := range tx.Keys(store.ActiveJobs, rec.Key()+"/") {
		id := strings.TrimPrefix(k, rec.Key()+"/")
		if skip[id] {
			continue
		}
		var j Job
		ok, err := tx.Get(store.Jobs, rec.Workspace+"/"+id, &j)
		if err != nil {
			return nil, err
		}
		if ok && !api.Terminal(j.Status) {
			out = append(out, j)
		}
	}
	sortJobs(out)
	return out, nil
}

func sortJobs(jobs []Job) {
	slices.SortFunc(jobs, func(a, b Job) int { return cmp.Or(a.SubmittedAt.Compare(b.SubmittedAt), cmp.Compare(a.ID, b.ID)) })
}

// PlacingJobs lists what a cluster's pass needs of the compute's jobs, oldest first: every
// job that is not finished and not Queued (a node holds each of them), and the head of its
// queue (the queued-jobs index, in queue order) until the jobs read there that fit the
// cluster need 2*maxNodes nodes together (all of it when maxNodes is 0). A pass places at most maxNodes nodes' worth of
// jobs and scales up for at most maxNodes more, so the jobs behind that head change
// nothing it decides, but for one that needs more than maxNodes nodes (max_node_count
// lowered under it), which fails once it reaches the head. Only the head is decoded: the
// pass's cost does not follow the length of the queue.
func PlacingJobs(tx *store.Tx, rec Compute, maxNodes int64) ([]Job, error) {
	prefix := rec.Key() + "/"
	queued := map[string]bool{}
	for _, k := range tx.Keys(store.QueuedJobs, prefix) {
		queued[k[strings.LastIndexByte(k, '/')+1:]] = true
	}
	out, err := activeJobs(tx, rec, queued)
	if err != nil {
		return nil, err
	}
	var (
		need  int64
		fails error
	)
	tx.EachKey(store.QueuedJobs, prefix, func(k string) bool {
		var j Job
		ok, err := tx.Get(store.Jobs, rec.Workspace+"/"+k[strings.LastIndexByte(k, '/')+1:], &j)
		if err != nil {
			fails = err
			return false
		}
		if ok && !api.Terminal(j.Status) {
			out = append(out, j)
			if c := max(j.Count, 1); c <= maxNodes {
				need += c
			}
		}
		return need < max(2*maxNodes, 1) // max_node_count 0: every queued job fails, all read
	})
	if fails != nil {
		return nil, fails
	}
	sortJobs(out)
	return out, nil
}

// queuedIndexKey is a Queued job's key in the queued-jobs index: its compute's, then its
// submit time (fixed width, so byte order is time order) and ID, the queue's order.
func queuedIndexKey(j Job) string {
	return j.ComputeKey + "/" + j.SubmittedAt.UTC().Format("20060102T150405.000000000") + "/" + j.ID
}

// PutJob stores a job and keeps the active-jobs index in step with its status. A
// pipeline's step job that is ended leaves a wake marker for its pipeline in the same
// write (PipelineWakes), so whoever ends a step, the pipeline learns of it even across a
// crash.
func PutJob(tx *store.Tx, j Job) error {
	if err := tx.Put(store.Jobs, j.Key(), j); err != nil {
		return err
	}
	if j.Status == api.JobQueued {
		if err := tx.Put(store.QueuedJobs, queuedIndexKey(j), j.Key()); err != nil {
			return err
		}
	} else if err := tx.Delete(store.QueuedJobs, queuedIndexKey(j)); err != nil {
		return err
	}
	indexKey := j.ComputeKey + "/" + j.ID
	if !api.Terminal(j.Status) {
		return tx.Put(store.ActiveJobs, indexKey, j.Key())
	}
	if err := tx.Delete(store.ActiveJobs, indexKey); err != nil {
		return err
	}
	if j.Pipeline != "" {
		return tx.Put(store.PipelineWakes, j.Workspace+"/"+j.Pipeline+"/"+j.ID, j.Key())
	}
	return nil
}

// PipelineWake is a pipeline with step jobs that ended since it last took them in.
type PipelineWake struct {
	Workspace, Pipeline string
	// Steps are the IDs of the ended step jobs, sorted.
	Steps []string
}

// PipelineWakes lists the pipelines with wake markers, in key order.
func PipelineWakes(tx *store.Tx) []PipelineWake {
	var out []PipelineWake
	for _, k := range tx.Keys(store.PipelineWakes, "") {
		parts := strings.SplitN(k, "/", 3)
		if len(parts) != 3 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Workspace == parts[0] && out[n-1].Pipeline == parts[1] {
			out[n-1].Steps = append(out[n-1].Steps, parts[2])
			continue
		}
		out = append(out, PipelineWake{Workspace: parts[0], Pipeline: parts[1], Steps: []string{parts[2]}})
	}
	return out
}

// ClearPipelineWake deletes one step's wake marker: in the write in which its pipeline
// takes the step's end into account.
func ClearPipelineWake(tx *store.Tx, workspace, pipeline, step string) error {
	return tx.Delete(store.PipelineWakes, workspace+"/"+pipeline+"/"+step)
}

// IndexActiveJobs rebuilds the active-jobs and queued-jobs indexes from every job: once
// when the engine starts, so a store written by an engine that had no index gets one.
func IndexActiveJobs(tx *store.Tx) error {
	for _, b := range []store.Bucket{store.ActiveJobs, store.QueuedJobs} {
		for _, k := range tx.Keys(b, "") {
			if err := tx.Delete(b, k); err != nil {
				return err
			}
		}
	}
	all, err := store.List[Job](tx, store.Jobs, "")
	if err != nil {
		return err
	}
	for _, j := range all {
		if !api.Terminal(j.Status) {
			if err := tx.Put(store.ActiveJobs, j.ComputeKey+"/"+j.ID, j.Key()); err != nil {
				return err
			}
			if j.Status == api.JobQueued {
				if err := tx.Put(store.QueuedJobs, queuedIndexKey(j), j.Key()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func GetJob(tx *store.Tx, workspace, id string) (Job, bool) {
	var j Job
	ok, err := tx.Get(store.Jobs, workspace+"/"+id, &j)
	return j, ok && err == nil
}

func NotFoundJob(workspace, id string) error {
	return api.Errorf(api.CodeNotFound, "", "job %q not found in workspace %q", id, workspace)
}

// ResolveJobOutput finds the registered output an azureml://jobs/<job>/outputs/<output>
// URI names, in workspace: its Digest is the manifest digest of the artifacts store. It
// refuses, naming which, a URI of another form, a job that does not exist or is not
// Completed, and an output the job does not have.
func ResolveJobOutput(tx *store.Tx, workspace, uri string) (api.JobOutput, error) {
	jobID, output, ok := api.ParseJobOutputURI(uri)
	if !ok {
		return api.JobOutput{}, api.Errorf(api.CodeInvalid, "path", "%q is not a job's output: the form is azureml://jobs/<job>/outputs/<output>", uri)
	}
	j, found := GetJob(tx, workspace, jobID)
	if !found {
		return api.JobOutput{}, api.Errorf(api.CodeNotFound, "path", "%s: job %q not found in workspace %q", uri, jobID, workspace)
	}
	out, declared := j.Outputs[output]
	if !declared {
		return api.JobOutput{}, api.Errorf(api.CodeNotFound, "path", "%s: job %q has no output %q (its outputs: %s)", uri, jobID, output, KeyList(j.Outputs))
	}
	if j.Status != api.JobCompleted {
		return api.JobOutput{}, api.Errorf(api.CodeConflict, "path", "%s: job %q is %s; only a Completed job's outputs are registered", uri, jobID, j.Status)
	}
	if out.Digest == "" {
		return api.JobOutput{}, api.Errorf(api.CodeConflict, "path", "%s: output %q of job %q is not registered", uri, output, jobID)
	}
	return out, nil
}

// KeyList is a map's keys, sorted and joined with ", ", or "none": the list an error
// gives of what a name could have been.
func KeyList[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

// IdempotentJob returns the job an earlier submission with idempotency key made, if one
// did: a retried submission is answered with it. A key whose job is gone is a conflict.
func IdempotentJob(tx *store.Tx, workspace, key string) (Job, bool, error) {
	if key == "" {
		return Job{}, false, nil
	}
	var rec Idempotency
	if ok, err := tx.Get(store.Idempotency, key, &rec); err != nil || !ok {
		return Job{}, false, err
	}
	prior, found := GetJob(tx, workspace, rec.ID)
	if !found {
		return Job{}, false, api.Errorf(api.CodeConflict, "", "idempotency key %q was used for %s", key, rec.ID)
	}
	return prior, true, nil
}

// Directories of a task's working directory that hold a job's downloaded inputs and
// uploaded outputs, and of the engine's directory of a job that holds its mounted ones.
const (
	InputsDir  = "inputs"
	OutputsDir = "outputs"
)

// InputRel is where an input is copied in the task's working directory (slash path).
func InputRel(name string) string { return InputsDir + "/" + name }

// OutputRel is an output's path in the task's working directory: its directory, or for
// a uri_file its one file, named after the output, in a directory of its own.
func OutputRel(name string, out api.JobOutput) string {
	if out.Type == api.URIFile {
		return OutputsDir + "/" + name + "/" + name
	}
	return OutputsDir + "/" + name
}
