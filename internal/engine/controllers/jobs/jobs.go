// Package jobs is the jobs' controller: it queues jobs (making a serverless compute for a
// job that asks for one), cancels them, serves their logs, and applies the end of each rank's
// task (its exit code and output) to the job and to the node it ran on. Placing a queued job
// on nodes is the compute's controller's decision (clusters, instances); starting and
// killing its tasks is the compute core's.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// Controller runs jobs on the shared compute core.
type Controller struct {
	*computes.Core
	log hclog.Logger
	// Kube places jobs on attached Kubernetes clusters (package attached).
	Kube KubeJobs
}

// KubeJobs resolves and checks the instance type of a job on an attached Kubernetes
// cluster (rec) before the job is queued: some node must be able to run its pods.
type KubeJobs interface {
	KubeJob(ctx context.Context, rec model.Compute, instanceType string) (*model.KubeJob, error)
}

// New builds the controller.
func New(core *computes.Core) *Controller {
	return &Controller{Core: core, log: core.Log.Named("jobs")}
}

// SubmitJob queues a job and scales its compute up at once. Idempotent under the key.
func (c *Controller) SubmitJob(ctx context.Context, workspace string, spec api.JobSpec, idempotencyKey string) (*api.Job, error) {
	if len(spec.Command) == 0 {
		return nil, api.Errorf(api.CodeInvalid, "command", "a job needs a command")
	}
	if spec.InstanceCount == 0 {
		spec.InstanceCount = 1
	}
	if err := validation.InstanceCount(spec.InstanceCount); err != nil {
		return nil, err
	}
	if spec.SnapshotID != "" && c.Snapshots != nil {
		if _, err := c.Snapshots.Path(spec.SnapshotID); err != nil {
			return nil, api.Errorf(api.CodeInvalid, "snapshot_id", "code snapshot %q is not known to this engine; upload it first", spec.SnapshotID)
		}
	}
	// A job on an attached Kubernetes cluster asks the cluster whether a node can run its
	// instance type, before the lock: the cluster may take seconds to answer.
	kubeJob, err := c.kubeJob(ctx, workspace, spec)
	if err != nil {
		return nil, err
	}
	c.Mu.Lock()
	defer c.Mu.Unlock()
	now := c.Clock.Now().UTC()
	j := model.Job{Job: api.Job{
		Workspace: workspace, Compute: spec.Compute, Status: api.JobQueued, Nodes: []string{},
		Command: spec.Command, Env: spec.Env, Count: spec.InstanceCount, SnapshotID: spec.SnapshotID, SubmittedAt: now,
	}}
	var serverless *model.Compute // the compute made for a serverless job, once committed
	err = c.Store.Update(func(tx *store.Tx) error {
		ws, err := model.GetWorkspace(tx, workspace)
		if err != nil {
			return err
		}
		seq, err := tx.NextSequence(store.Jobs)
		if err != nil {
			return err
		}
		// Sequential IDs keep first-in-first-out order when submissions share a timestamp.
		j.ID = fmt.Sprintf("job-%08d", seq)
		if idempotencyKey != "" {
			var rec model.Idempotency
			if ok, err := tx.Get(store.Idempotency, idempotencyKey, &rec); err != nil {
				return err
			} else if ok {
				prior, found := model.GetJob(tx, workspace, rec.ID)
				if !found {
					return api.Errorf(api.CodeConflict, "", "idempotency key %q was used for %s", idempotencyKey, rec.ID)
				}
				j = prior
				return nil
			}
		}
		if spec.Environment != "" {
			env, err := model.GetEnvironment(tx, workspace, spec.Environment)
			if err != nil {
				return err
			}
			j.EnvDef = &model.JobEnvironment{Name: env.Name, Hash: env.ContentHash, Definition: env.Definition()}
			j.Environment, j.EnvironmentHash = env.Name, env.ContentHash
		}
		var rec model.Compute
		if spec.Compute == api.ServerlessCompute {
			if spec.InstanceType == "" {
				return api.Errorf(api.CodeInvalid, "instance_type", "a serverless job needs --instance-type, a VM size such as Standard_DS3_v2")
			}
			size, err := validation.VMSize("instance_type", spec.InstanceType, catalog.ComputeCluster)
			if err != nil {
				return err
			}
			rec = model.Compute{
				Workspace: workspace, Name: "serverless-" + j.ID, Type: api.TypeComputeCluster, VMSize: size.Name,
				VMPriority: api.PriorityDedicated, CreatedOn: now, Serverless: true, ForJob: j.ID,
				ScaleSettings: &api.ScaleSettings{MinNodeCount: 0, MaxNodeCount: spec.InstanceCount, ScaleDownNodesAfterIdleDuration: "PT0S"},
			}
			rec.ParseDurations()
			if err := c.CheckQuota(ws, rec, "instance_type"); err != nil {
				return err
			}
			if err := tx.Put(store.Computes, rec.Key(), rec); err != nil {
				return err
			}
			serverless = &rec
		} else {
			if rec, err = model.GetCompute(tx, workspace, spec.Compute); err != nil || rec.Serverless {
				return model.NotFoundCompute(workspace, spec.Compute)
			}
			if rec.Deleting {
				return api.Errorf(api.CodeConflict, "compute", "compute %q is being deleted", spec.Compute)
			}
			if rec.Kubernetes != nil {
				if kubeJob == nil || kubeJob.Parent != rec.Name {
					return api.Errorf(api.CodeConflict, "compute", "compute %q changed while the job was submitted; submit it again", spec.Compute)
				}
				// The job's pods are the nodes of a compute of its own, released at its end.
				rec = model.Compute{
					Workspace: workspace, Name: model.KubeJobComputePrefix + j.ID, Type: api.TypeComputeCluster,
					CreatedOn: now, Serverless: true, ForJob: j.ID, KubeJob: kubeJob,
					ScaleSettings: &api.ScaleSettings{MinNodeCount: 0, MaxNodeCount: spec.InstanceCount, ScaleDownNodesAfterIdleDuration: "PT0S"},
				}
				rec.ParseDurations()
				if err := tx.Put(store.Computes, rec.Key(), rec); err != nil {
					return err
				}
				serverless = &rec
				j.InstanceType = kubeJob.InstanceType
			} else if spec.InstanceType != "" {
				return api.Errorf(api.CodeInvalid, "instance_type", "compute %q has fixed nodes; --instance-type is for --compute serverless (a VM size) and for attached Kubernetes computes (one of their instance types)", spec.Compute)
			}
			if rec.Instance != nil && (rec.Instance.Desired != api.InstanceRunning || rec.Instance.State == api.InstanceSetupFailed) {
				return api.Errorf(api.CodeConflict, "compute", "compute instance %q is %s; start it first (mlcompute compute start)", spec.Compute, rec.Instance.State)
			}
			if rec.Attached != nil && spec.InstanceCount > 1 {
				return api.Errorf(api.CodeInvalid, "instance_count",
					"attached compute %q is one machine, so a job on it runs with instance_count 1 (asked: %d); attach more machines and submit a job to each", spec.Compute, spec.InstanceCount)
			}
			if rec.KubeJob == nil && spec.InstanceCount > rec.MaxNodes() {
				return api.Errorf(api.CodeInvalid, "instance_count",
					"the job asks for %d nodes but compute %q has max_node_count %d; lower --instance-count or raise max_node_count",
					spec.InstanceCount, spec.Compute, rec.MaxNodes())
			}
		}
		j.ComputeKey = rec.Key()
		if err := model.PutJob(tx, j); err != nil {
			return err
		}
		return model.Remember(tx, idempotencyKey, j.ID, c.Clock.Now())
	})
	if err != nil {
		return nil, err
	}
	if serverless != nil {
		c.IndexCompute(*serverless)
	}
	c.log.Info("job queued", "job", j.ID, "compute", j.ComputeKey, "instance_count", j.Count)
	c.Kick(j.ComputeKey)
	out := j.Job
	return &out, nil
}

// kubeJob resolves the instance type of a job on an attached Kubernetes cluster; nil
// for a job on any other compute (or on none that exists: the transaction says so).
func (c *Controller) kubeJob(ctx context.Context, workspace string, spec api.JobSpec) (*model.KubeJob, error) {
	if spec.Compute == api.ServerlessCompute || c.Kube == nil {
		return nil, nil
	}
	var rec model.Compute
	err := c.Store.View(func(tx *store.Tx) (err error) { rec, err = model.GetCompute(tx, workspace, spec.Compute); return err })
	if err != nil || rec.Kubernetes == nil || rec.Deleting {
		return nil, nil
	}
	return c.Kube.KubeJob(ctx, rec, spec.InstanceType)
}

// GetJob returns a job.
func (c *Controller) GetJob(_ context.Context, workspace, id string) (*api.Job, error) {
	var out *api.Job
	err := c.Store.View(func(tx *store.Tx) error {
		j, ok := model.GetJob(tx, workspace, id)
		if !ok {
			return model.NotFoundJob(workspace, id)
		}
		out = &j.Job
		out.Reason = waitReason(tx, j)
		return nil
	})
	return out, err
}

// ListJobs returns a workspace's jobs, newest first.
func (c *Controller) ListJobs(_ context.Context, workspace string) ([]api.Job, error) {
	var out []api.Job
	err := c.Store.View(func(tx *store.Tx) error {
		if _, err := model.GetWorkspace(tx, workspace); err != nil {
			return err
		}
		all, err := store.List[model.Job](tx, store.Jobs, workspace+"/")
		for _, j := range all {
			j.Reason = waitReason(tx, j)
			out = append(out, j.Job)
		}
		return err
	})
	slices.SortFunc(out, func(a, b api.Job) int { return b.SubmittedAt.Compare(a.SubmittedAt) })
	return out, err
}

// CancelJob cancels a job that has not finished; cancelling a finished job returns it as is.
func (c *Controller) CancelJob(_ context.Context, workspace, id string) (*api.Job, error) {
	c.Mu.Lock()
	var j model.Job
	err := c.Store.Update(func(tx *store.Tx) error {
		var ok bool
		if j, ok = model.GetJob(tx, workspace, id); !ok {
			return model.NotFoundJob(workspace, id)
		}
		if api.Terminal(j.Status) {
			return nil
		}
		j.Finish(api.JobCanceled, nil, "canceled by user", c.Clock.Now().UTC())
		return model.PutJob(tx, j)
	})
	c.Mu.Unlock()
	if err != nil {
		return nil, err
	}
	if len(j.Nodes) > 0 {
		c.Loop.Go(func() { c.KillJob(c.Ctx, j) })
	}
	c.Kick(j.ComputeKey)
	return &j.Job, nil
}

// JobLogs returns a rank's output from offset, the next offset, and whether the output is
// complete (the job ended and the rank's output was saved). A job with an environment's
// log opens with the environment's preparation (its build, or the note that none was
// needed), then the task's output.
func (c *Controller) JobLogs(ctx context.Context, workspace, id string, rank int, offset int64) ([]byte, int64, bool, error) {
	j, err := c.GetJob(ctx, workspace, id)
	if err != nil {
		return nil, offset, false, err
	}
	if rank < 0 || int64(rank) >= j.Count {
		return nil, offset, false, api.Errorf(api.CodeInvalid, "rank", "rank must be between 0 and %d", j.Count-1)
	}
	if raw, err := os.ReadFile(c.JobLogPath(id, rank)); err == nil {
		if offset > int64(len(raw)) {
			offset = int64(len(raw))
		}
		return raw[offset:], int64(len(raw)), api.Terminal(j.Status), nil
	}
	var rec model.Job
	_ = c.Store.View(func(tx *store.Tx) error { rec, _ = model.GetJob(tx, workspace, id); return nil })
	if rank >= len(j.Nodes) || (j.Status != api.JobRunning && j.Status != api.JobPreparing && !api.Terminal(j.Status)) {
		// Queued, or ended before its output could be saved (e.g. its node was lost).
		return nil, offset, api.Terminal(j.Status), nil
	}
	var prefix int64
	if rec.EnvDef != nil {
		envLog, err := os.ReadFile(c.EnvLogPath(id, rank))
		if err != nil {
			// Still preparing: the preparation's output so far.
			data, err := c.Driver.TaskOutput(ctx, j.Nodes[rank], rec.EnvTaskKey(rank), offset)
			if err != nil && !driver.IsNotFound(err) {
				return nil, offset, false, err
			}
			return data, offset + int64(len(data)), false, nil
		}
		if offset < int64(len(envLog)) {
			return envLog[offset:], int64(len(envLog)), false, nil
		}
		prefix = int64(len(envLog))
	}
	data, err := c.Driver.TaskOutput(ctx, j.Nodes[rank], rec.TaskKey(rank), offset-prefix)
	if err == nil {
		return data, offset + int64(len(data)), false, nil
	}
	if !driver.IsNotFound(err) {
		return nil, offset, false, err
	}
	return nil, offset, api.Terminal(j.Status), nil
}

// EnvTaskExited applies the end of a rank's environment preparation: it saves the output
// (the head of the rank's log), fails the job with the output's last lines when the
// preparation failed, and starts the job's tasks once every rank's preparation succeeded.
func (c *Controller) EnvTaskExited(ctx context.Context, nodeID, task string, code int) {
	jobID, attempt, rank, ok := model.ParseTaskKey(strings.TrimPrefix(task, model.EnvTaskPrefix))
	if !ok {
		return
	}
	var j model.Job
	var found bool
	_ = c.Store.View(func(tx *store.Tx) error {
		if n, ok := c.NodeByID(tx, nodeID); ok {
			j, found = model.GetJob(tx, model.WorkspaceOf(n.Compute), jobID)
		}
		return nil
	})
	if !found || attempt != j.Attempt || j.EnvDef == nil {
		return
	}
	out, _ := c.Driver.TaskOutput(ctx, nodeID, task, 0)
	if j.Status == api.JobPreparing {
		if err := computes.WriteFileAtomic(c.EnvLogPath(jobID, rank), out); err != nil {
			c.log.Error("saving environment output failed", "job", jobID, "rank", rank, "error", err)
		}
	}
	var start, failed, ended bool
	c.Mu.Lock()
	_ = c.Store.Update(func(tx *store.Tx) error {
		cur, ok := model.GetJob(tx, j.Workspace, jobID)
		if !ok || cur.Attempt != attempt {
			return nil
		}
		j = cur
		if cur.Status != api.JobPreparing {
			ended = api.Terminal(cur.Status)
			return nil
		}
		if cur.EnvAttempt != attempt || cur.EnvExits == nil {
			cur.EnvAttempt, cur.EnvExits = attempt, map[int]int{}
		}
		cur.EnvExits[rank] = code
		switch {
		case code != 0:
			cur.Preparing = ""
			cur.Finish(api.JobFailed, nil, envFailure(cur, nodeID, code, out), c.Clock.Now().UTC())
			failed = true
		case cur.EnvReady():
			start = true
		}
		j = cur
		return model.PutJob(tx, cur)
	})
	c.Mu.Unlock()
	c.log.Info("environment preparation exited", "job", jobID, "attempt", attempt, "rank", rank, "exit_code", code)
	switch {
	case start:
		c.Loop.Go(func() { c.StartJob(ctx, j) })
	case failed:
		// The rank's log is its preparation's output: the job never ran.
		for r := range j.Nodes {
			if raw, err := os.ReadFile(c.EnvLogPath(jobID, r)); err == nil {
				_ = computes.WriteFileAtomic(c.JobLogPath(jobID, r), raw)
			} else {
				_ = computes.WriteFileAtomic(c.JobLogPath(jobID, r), nil)
			}
		}
		c.Loop.Go(func() { c.KillJob(ctx, j); c.FreeNodes(j) })
	case ended:
		c.FreeNodes(j)
	}
}

// envFailure is a failed preparation's error: what failed, where, and the last lines of
// its output (pip's error).
func envFailure(j model.Job, node string, code int, out []byte) string {
	what := fmt.Sprintf("building environment %q", j.EnvDef.Name)
	if j.EnvDef.Definition.UserManaged != nil {
		what = fmt.Sprintf("checking the interpreter %s of environment %q", j.EnvDef.Definition.UserManaged.InterpreterPath, j.EnvDef.Name)
	}
	msg := fmt.Sprintf("%s failed on node %s (exit status %d)", what, node, code)
	if last := computes.LastLines(out, 8); last != "" {
		msg += ":\n" + last
	}
	return msg
}

// TaskExited saves a rank's output, frees its node and finishes the job when it is done.
// Exits of an earlier attempt (the job was preempted and requeued) only free their node.
func (c *Controller) TaskExited(ctx context.Context, nodeID, task string, code int) {
	jobID, attempt, rank, ok := model.ParseTaskKey(task)
	if !ok {
		return
	}
	var j model.Job
	var found bool
	_ = c.Store.View(func(tx *store.Tx) error {
		n, ok := c.NodeByID(tx, nodeID)
		if ok {
			j, found = model.GetJob(tx, model.WorkspaceOf(n.Compute), jobID)
		}
		return nil
	})
	if !found {
		return
	}
	current := attempt == j.Attempt
	if current {
		if out, err := c.Driver.TaskOutput(ctx, nodeID, task, 0); err == nil {
			if envLog, err := os.ReadFile(c.EnvLogPath(jobID, rank)); err == nil && j.EnvDef != nil {
				out = append(envLog, out...)
			}
			if err := computes.WriteFileAtomic(c.JobLogPath(jobID, rank), out); err != nil {
				c.log.Error("saving job output failed", "job", jobID, "rank", rank, "error", err)
			}
		}
	}
	var kill bool
	c.Mu.Lock()
	now := c.Clock.Now().UTC()
	_ = c.Store.Update(func(tx *store.Tx) error {
		cur, ok := model.GetJob(tx, j.Workspace, jobID)
		if !ok {
			return nil
		}
		if current && cur.Attempt == attempt {
			if cur.RankExits == nil {
				cur.RankExits = map[int]int{}
			}
			if _, seen := cur.RankExits[rank]; !seen {
				cur.RankExits[rank] = code
				if !api.Terminal(cur.Status) {
					switch {
					case code != 0:
						exit := code
						cur.Finish(api.JobFailed, &exit, fmt.Sprintf("rank %d exited with status %d", rank, code), now)
						kill = true
					case int64(len(cur.RankExits)) == cur.Count:
						exit := 0
						cur.Finish(api.JobCompleted, &exit, "", now)
					}
				}
				if err := model.PutJob(tx, cur); err != nil {
					return err
				}
			}
		}
		j = cur
		var n model.Node
		if ok, err := tx.Get(store.Nodes, cur.ComputeKey+"/"+nodeID, &n); err != nil || !ok || n.Task != task {
			return err
		}
		n.JobID, n.Task = "", ""
		if n.State == api.NodeRunning {
			n.State, n.IdleSince = api.NodeIdle, now
		}
		return tx.Put(store.Nodes, n.Key(), n)
	})
	c.Mu.Unlock()
	if kill {
		c.Loop.Go(func() { c.KillJob(ctx, j) })
	}
	c.log.Info("task exited", "job", jobID, "attempt", attempt, "rank", rank, "exit_code", code, "status", j.Status)
	c.Kick(j.ComputeKey)
}

// PutSnapshot stores an uploaded code snapshot and returns its ID.
func (c *Controller) PutSnapshot(r io.Reader) (string, error) {
	if c.Snapshots == nil {
		return "", errors.New("this engine keeps no snapshots")
	}
	id, err := c.Snapshots.Put(r)
	if err != nil {
		return "", api.Errorf(api.CodeInvalid, "snapshot", "%v", err)
	}
	return id, nil
}

// waitReason says why a job that has not started is waiting, from its compute's state as
// stored: what a user waiting on a scale-up wants to know. It is derived when the job is
// read, so waiting costs no writes.
func waitReason(tx *store.Tx, j model.Job) string {
	if j.Status != api.JobQueued && j.Status != api.JobPreparing {
		return ""
	}
	if j.Status == api.JobPreparing {
		if j.Preparing != "" {
			return j.Preparing
		}
		return "starting the job's tasks on its nodes"
	}
	var rec model.Compute
	if ok, err := tx.Get(store.Computes, j.ComputeKey, &rec); err != nil || !ok {
		return "waiting for its compute"
	}
	if rec.Deleting {
		return "its compute is being deleted"
	}
	if len(rec.Errors) > 0 {
		return "waiting for nodes: " + rec.Errors[0].Message
	}
	if inst := rec.Instance; inst != nil && inst.State != api.InstanceRunning && inst.State != api.InstanceJobRunning {
		return fmt.Sprintf("waiting for compute instance %s, which is %s", rec.Name, inst.State)
	}
	nodes, _ := store.List[model.Node](tx, store.Nodes, rec.Key()+"/")
	var preparing, busy int64
	var pending string
	for _, n := range nodes {
		switch n.State {
		case api.NodePreparing, api.NodePreempted:
			preparing++
			if n.Reason != "" {
				pending = n.Reason
			}
		case api.NodeRunning, api.NodeLeaving:
			busy++
		}
	}
	switch {
	case pending != "":
		return fmt.Sprintf("waiting for %d node(s) to start (%s)", preparing, pending)
	case preparing > 0:
		return fmt.Sprintf("waiting for %d node(s) to start", preparing)
	case busy > 0 && busy+j.Count > rec.MaxNodes():
		return fmt.Sprintf("waiting for nodes to free up: %d of max_node_count %d are busy", busy, rec.MaxNodes())
	}
	return "queued behind earlier jobs of the compute (first in, first out)"
}

// LogSource names the task whose output a rank's log reads from now on: the node and the
// task key of the environment's preparation while it runs, then of the job's task. ok is
// false while the rank has no node, and once its log is saved (the job ended). A follower
// of the log watches that task's output to be woken by its writes.
func (c *Controller) LogSource(workspace, id string, rank int) (node, task string, ok bool) {
	var j model.Job
	_ = c.Store.View(func(tx *store.Tx) error { j, ok = model.GetJob(tx, workspace, id); return nil })
	if !ok || rank < 0 || rank >= len(j.Nodes) || (j.Status != api.JobRunning && j.Status != api.JobPreparing) {
		return "", "", false
	}
	if _, err := os.Stat(c.JobLogPath(id, rank)); err == nil {
		return "", "", false
	}
	if j.EnvDef != nil {
		if _, err := os.Stat(c.EnvLogPath(id, rank)); err != nil {
			return j.Nodes[rank], j.EnvTaskKey(rank), true
		}
	}
	return j.Nodes[rank], j.TaskKey(rank), true
}
