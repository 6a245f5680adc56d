package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// SubmitJob queues a job and scales its compute up at once. Idempotent under the key.
func (e *Engine) SubmitJob(_ context.Context, workspace string, spec api.JobSpec, idempotencyKey string) (*api.Job, error) {
	if len(spec.Command) == 0 {
		return nil, api.Errorf(api.CodeInvalid, "command", "a job needs a command")
	}
	if spec.InstanceCount == 0 {
		spec.InstanceCount = 1
	}
	if err := validation.InstanceCount(spec.InstanceCount); err != nil {
		return nil, err
	}
	if spec.SnapshotID != "" && e.snapshots != nil {
		if _, err := e.snapshots.Path(spec.SnapshotID); err != nil {
			return nil, api.Errorf(api.CodeInvalid, "snapshot_id", "code snapshot %q is not known to this engine; upload it first", spec.SnapshotID)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now().UTC()
	j := model.Job{Job: api.Job{
		Workspace: workspace, Compute: spec.Compute, Status: api.JobQueued, Nodes: []string{},
		Command: spec.Command, Env: spec.Env, Count: spec.InstanceCount, SnapshotID: spec.SnapshotID, SubmittedAt: now,
	}}
	var serverless *model.Compute // the compute made for a serverless job, once committed
	err := e.store.Update(func(tx *store.Tx) error {
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
			if err := e.checkQuota(ws, rec, "instance_type"); err != nil {
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
			if rec.Instance != nil && (rec.Instance.Desired != api.InstanceRunning || rec.Instance.State == api.InstanceSetupFailed) {
				return api.Errorf(api.CodeConflict, "compute", "compute instance %q is %s; start it first (mlcompute compute start)", spec.Compute, rec.Instance.State)
			}
			if rec.Attached != nil && spec.InstanceCount > 1 {
				return api.Errorf(api.CodeInvalid, "instance_count",
					"attached compute %q is one machine, so a job on it runs with instance_count 1 (asked: %d); attach more machines and submit a job to each", spec.Compute, spec.InstanceCount)
			}
			if spec.InstanceCount > rec.MaxNodes() {
				return api.Errorf(api.CodeInvalid, "instance_count",
					"the job asks for %d nodes but compute %q has max_node_count %d; lower --instance-count or raise max_node_count",
					spec.InstanceCount, spec.Compute, rec.MaxNodes())
			}
		}
		j.ComputeKey = rec.Key()
		if err := tx.Put(store.Jobs, j.Key(), j); err != nil {
			return err
		}
		return model.Remember(tx, idempotencyKey, j.ID)
	})
	if err != nil {
		return nil, err
	}
	if serverless != nil {
		e.indexCompute(*serverless)
	}
	e.log.Info("job queued", "job", j.ID, "compute", j.ComputeKey, "instance_count", j.Count)
	e.kick(j.ComputeKey)
	out := j.Job
	return &out, nil
}

// GetJob returns a job.
func (e *Engine) GetJob(_ context.Context, workspace, id string) (*api.Job, error) {
	var out *api.Job
	err := e.store.View(func(tx *store.Tx) error {
		j, ok := model.GetJob(tx, workspace, id)
		if !ok {
			return model.NotFoundJob(workspace, id)
		}
		out = &j.Job
		return nil
	})
	return out, err
}

// ListJobs returns a workspace's jobs, newest first.
func (e *Engine) ListJobs(_ context.Context, workspace string) ([]api.Job, error) {
	var out []api.Job
	err := e.store.View(func(tx *store.Tx) error {
		if _, err := model.GetWorkspace(tx, workspace); err != nil {
			return err
		}
		all, err := store.List[model.Job](tx, store.Jobs, workspace+"/")
		for _, j := range all {
			out = append(out, j.Job)
		}
		return err
	})
	slices.SortFunc(out, func(a, b api.Job) int { return b.SubmittedAt.Compare(a.SubmittedAt) })
	return out, err
}

// CancelJob cancels a job that has not finished; cancelling a finished job returns it as is.
func (e *Engine) CancelJob(_ context.Context, workspace, id string) (*api.Job, error) {
	e.mu.Lock()
	var j model.Job
	err := e.store.Update(func(tx *store.Tx) error {
		var ok bool
		if j, ok = model.GetJob(tx, workspace, id); !ok {
			return model.NotFoundJob(workspace, id)
		}
		if api.Terminal(j.Status) {
			return nil
		}
		j.Finish(api.JobCanceled, nil, "canceled by user", e.clock.Now().UTC())
		return tx.Put(store.Jobs, j.Key(), j)
	})
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if len(j.Nodes) > 0 {
		e.loop.Go(func() { e.killJob(e.ctx, j) })
	}
	e.kick(j.ComputeKey)
	return &j.Job, nil
}

// JobLogs returns a rank's output from offset, the next offset, and whether the output is
// complete (the job ended and the rank's output was saved).
func (e *Engine) JobLogs(ctx context.Context, workspace, id string, rank int, offset int64) ([]byte, int64, bool, error) {
	j, err := e.GetJob(ctx, workspace, id)
	if err != nil {
		return nil, offset, false, err
	}
	if rank < 0 || int64(rank) >= j.Count {
		return nil, offset, false, api.Errorf(api.CodeInvalid, "rank", "rank must be between 0 and %d", j.Count-1)
	}
	if raw, err := os.ReadFile(e.jobLogPath(id, rank)); err == nil {
		if offset > int64(len(raw)) {
			offset = int64(len(raw))
		}
		return raw[offset:], int64(len(raw)), api.Terminal(j.Status), nil
	}
	var rec model.Job
	_ = e.store.View(func(tx *store.Tx) error { rec, _ = model.GetJob(tx, workspace, id); return nil })
	if rank < len(j.Nodes) && (j.Status == api.JobRunning || j.Status == api.JobPreparing || api.Terminal(j.Status)) {
		data, err := e.driver.TaskOutput(ctx, j.Nodes[rank], rec.TaskKey(rank), offset)
		if err == nil {
			return data, offset + int64(len(data)), false, nil
		}
		if !driver.IsNotFound(err) {
			return nil, offset, false, err
		}
	}
	// Queued, or ended before its output could be saved (e.g. its node was lost).
	return nil, offset, api.Terminal(j.Status), nil
}

// startJob starts every rank of an assigned job.
func (e *Engine) startJob(ctx context.Context, j model.Job) {
	if j.MasterPort == 0 {
		j.MasterPort = freePort()
		e.mu.Lock()
		_ = e.store.Update(func(tx *store.Tx) error {
			cur, ok := model.GetJob(tx, j.Workspace, j.ID)
			if !ok || cur.Status != api.JobPreparing {
				return nil
			}
			cur.MasterPort = j.MasterPort
			return tx.Put(store.Jobs, cur.Key(), cur)
		})
		e.mu.Unlock()
	}
	codeDir := ""
	if j.SnapshotID != "" && e.snapshots != nil {
		codeDir, _ = e.snapshots.Path(j.SnapshotID)
	}
	master, err := e.driver.Describe(ctx, j.Nodes[0])
	for rank, node := range j.Nodes {
		if err != nil {
			break
		}
		env := map[string]string{}
		for k, v := range j.Env {
			env[k] = v
		}
		env["RANK"], env["NODE_RANK"], env["LOCAL_RANK"] = strconv.Itoa(rank), strconv.Itoa(rank), "0"
		env["WORLD_SIZE"] = strconv.FormatInt(j.Count, 10)
		env["MASTER_ADDR"], env["MASTER_PORT"] = master.Address, strconv.Itoa(j.MasterPort)
		env["MLCOMPUTE_JOB_ID"] = j.ID
		err = e.driver.StartTask(ctx, node, driver.TaskSpec{Key: j.TaskKey(rank), Command: j.Command, Env: env, CodeDir: codeDir})
	}
	if ctx.Err() != nil {
		return
	}
	e.mu.Lock()
	_ = e.store.Update(func(tx *store.Tx) error {
		cur, ok := model.GetJob(tx, j.Workspace, j.ID)
		if !ok || cur.Status != api.JobPreparing {
			return nil
		}
		now := e.clock.Now().UTC()
		if err != nil {
			cur.Finish(api.JobFailed, nil, fmt.Sprintf("starting the job: %v", err), now)
		} else {
			cur.Status, cur.StartedAt = api.JobRunning, &now
		}
		return tx.Put(store.Jobs, cur.Key(), cur)
	})
	e.mu.Unlock()
	if err != nil {
		e.log.Error("job failed to start", "job", j.ID, "error", err)
		e.killJob(ctx, j)
		e.freeNodes(j)
		return
	}
	e.log.Info("job running", "job", j.ID, "nodes", strings.Join(j.Nodes, ","))
}

// killJob kills every rank of a job; the ranks' exits then free their nodes.
func (e *Engine) killJob(ctx context.Context, j model.Job) {
	for rank, node := range j.Nodes {
		if err := e.driver.KillTask(ctx, node, j.TaskKey(rank)); err != nil && !driver.IsNotFound(err) {
			e.log.Error("killing task failed", "job", j.ID, "rank", rank, "error", err)
		}
	}
}

// freeNodes returns a job's nodes to idle when its tasks never started.
func (e *Engine) freeNodes(j model.Job) {
	e.mu.Lock()
	now := e.clock.Now().UTC()
	for _, id := range j.Nodes {
		_ = e.updateNode(j.ComputeKey+"/"+id, func(n *model.Node) bool {
			if n.JobID != j.ID {
				return false
			}
			n.JobID, n.Task = "", ""
			if n.State == api.NodeRunning {
				n.State, n.IdleSince = api.NodeIdle, now
			}
			return true
		})
	}
	e.mu.Unlock()
	e.kick(j.ComputeKey)
}

// taskExited saves a rank's output, frees its node and finishes the job when it is done.
// Exits of an earlier attempt (the job was preempted and requeued) only free their node.
func (e *Engine) taskExited(ctx context.Context, nodeID, task string, code int) {
	jobID, attempt, rank, ok := model.ParseTaskKey(task)
	if !ok {
		return
	}
	var j model.Job
	var found bool
	_ = e.store.View(func(tx *store.Tx) error {
		n, ok := e.nodeByID(tx, nodeID)
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
		if out, err := e.driver.TaskOutput(ctx, nodeID, task, 0); err == nil {
			if err := writeFileAtomic(e.jobLogPath(jobID, rank), out); err != nil {
				e.log.Error("saving job output failed", "job", jobID, "rank", rank, "error", err)
			}
		}
	}
	var kill bool
	e.mu.Lock()
	now := e.clock.Now().UTC()
	_ = e.store.Update(func(tx *store.Tx) error {
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
						c := code
						cur.Finish(api.JobFailed, &c, fmt.Sprintf("rank %d exited with status %d", rank, code), now)
						kill = true
					case int64(len(cur.RankExits)) == cur.Count:
						c := 0
						cur.Finish(api.JobCompleted, &c, "", now)
					}
				}
				if err := tx.Put(store.Jobs, cur.Key(), cur); err != nil {
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
	e.mu.Unlock()
	if kill {
		e.loop.Go(func() { e.killJob(ctx, j) })
	}
	e.log.Info("task exited", "job", jobID, "attempt", attempt, "rank", rank, "exit_code", code, "status", j.Status)
	e.kick(j.ComputeKey)
}

// freePort picks a TCP port for MASTER_PORT; local nodes share this machine's loopback.
func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 29500
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// PutSnapshot stores an uploaded code snapshot and returns its ID.
func (e *Engine) PutSnapshot(r io.Reader) (string, error) {
	if e.snapshots == nil {
		return "", errors.New("this engine keeps no snapshots")
	}
	id, err := e.snapshots.Put(r)
	if err != nil {
		return "", api.Errorf(api.CodeInvalid, "snapshot", "%v", err)
	}
	return id, nil
}
