package model

import (
	"fmt"
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
	MasterPort int         `json:"master_port,omitempty"`
	// Attempt counts the times the job was started; a job whose nodes were preempted goes
	// back to the queue with the next attempt, so exits of the old attempt's tasks are
	// recognised and ignored.
	Attempt int `json:"attempt,omitempty"`
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

func (j *Job) Finish(status string, exitCode *int, why string, now time.Time) {
	j.Status, j.ExitCode, j.Error, j.EndedAt = status, exitCode, why, &now
}

// ActiveJobs lists the compute's jobs that are not finished, oldest first.
func ActiveJobs(tx *store.Tx, rec Compute) ([]Job, error) {
	all, err := store.List[Job](tx, store.Jobs, rec.Workspace+"/")
	if err != nil {
		return nil, err
	}
	var out []Job
	for _, j := range all {
		if j.ComputeKey == rec.Key() && !api.Terminal(j.Status) {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b Job) int { return a.SubmittedAt.Compare(b.SubmittedAt) })
	return out, nil
}

func GetJob(tx *store.Tx, workspace, id string) (Job, bool) {
	var j Job
	ok, err := tx.Get(store.Jobs, workspace+"/"+id, &j)
	return j, ok && err == nil
}

func NotFoundJob(workspace, id string) error {
	return api.Errorf(api.CodeNotFound, "", "job %q not found in workspace %q", id, workspace)
}
