package computes

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/atomicfile"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// StartJob starts every rank of an assigned job.
func (c *Core) StartJob(ctx context.Context, j model.Job) {
	if c.prepareEnvironment(ctx, j) {
		return
	}
	codeDir := ""
	if j.SnapshotID != "" && c.snapshots != nil {
		codeDir, _ = c.snapshots.Path(j.SnapshotID)
	}
	inputs, outputs, release, err := c.jobFiles(ctx, j)
	defer release()
	var master driver.NodeInfo
	if err == nil {
		master, err = c.nodes.Describe(ctx, j.Nodes[0])
	}
	if err == nil && j.MasterPort == 0 {
		j.MasterPort, err = c.masterPort(ctx, j)
	}
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
		spec := driver.TaskSpec{Key: j.TaskKey(rank), Command: j.Command, Env: env, CodeDir: codeDir, Inputs: inputs, Outputs: outputs}
		if err = c.wrapTask(j, &spec); err == nil {
			err = c.tasks.StartTask(ctx, node, spec)
		}
	}
	if ctx.Err() != nil {
		return
	}
	_ = c.Write(func(tx *store.Tx) error {
		cur, ok := model.GetJob(tx, j.Workspace, j.ID)
		if !ok || cur.Status != api.JobPreparing {
			return nil
		}
		now := c.clock.Now().UTC()
		cur.Preparing = ""
		if err != nil {
			cur.Finish(api.JobFailed, nil, fmt.Sprintf("starting the job: %v", err), now)
		} else {
			cur.Status, cur.StartedAt = api.JobRunning, &now
		}
		return model.PutJob(tx, cur)
	})
	if err != nil {
		c.log.Error("job failed to start", "job", j.ID, "error", err)
		c.KillJob(ctx, j)
		c.FreeNodes(j)
		return
	}
	c.log.Info("job running", "job", j.ID, "nodes", strings.Join(j.Nodes, ","))
	if j.TimeoutSeconds > 0 {
		c.Kick(j.ComputeKey) // its pass sets the limits.timeout timer from the stored start
	}
}

// KillJob kills every rank of a job (and its environment's preparation); the ranks' exits
// then free their nodes.
func (c *Core) KillJob(ctx context.Context, j model.Job) {
	for rank, node := range j.Nodes {
		if j.EnvDef != nil {
			if err := c.tasks.KillTask(ctx, node, j.EnvTaskKey(rank)); err != nil {
				c.log.Error("killing environment task failed", "job", j.ID, "rank", rank, "error", err)
			}
		}
		if err := c.tasks.KillTask(ctx, node, j.TaskKey(rank)); err != nil {
			c.log.Error("killing task failed", "job", j.ID, "rank", rank, "error", err)
		}
	}
}

// FreeNodes returns a job's nodes to idle when its tasks never started.
func (c *Core) FreeNodes(j model.Job) {
	_ = c.Write(func(tx *store.Tx) error {
		now := c.clock.Now().UTC()
		for _, id := range j.Nodes {
			var n model.Node
			if ok, err := tx.Get(store.Nodes, j.ComputeKey+"/"+id, &n); err != nil || !ok || n.JobID != j.ID {
				continue // as before: each node on its own, a missing one skipped
			}
			n.JobID, n.Task = "", ""
			if n.State == api.NodeRunning {
				n.State, n.IdleSince = api.NodeIdle, now
			}
			if err := tx.Put(store.Nodes, n.Key(), n); err != nil {
				return err
			}
		}
		return nil
	})
	c.Kick(j.ComputeKey)
}

// masterPort asks rank 0's node for MASTER_PORT, just before the ranks start. Ranks on
// several nodes must agree on it, also when a restarted engine starts them again, so the
// port is committed before any starts. A job of one node has no one to agree with, and
// skips that commit on its way to its first output.
func (c *Core) masterPort(ctx context.Context, j model.Job) (int, error) {
	port, err := c.tasks.TaskPort(ctx, j.Nodes[0])
	if err != nil {
		return 0, fmt.Errorf("asking node %s for MASTER_PORT: %w", j.Nodes[0], err)
	}
	if j.Count == 1 {
		return port, nil
	}
	err = c.Write(func(tx *store.Tx) error {
		cur, ok := model.GetJob(tx, j.Workspace, j.ID)
		if !ok || cur.Status != api.JobPreparing || cur.Attempt != j.Attempt {
			return nil
		}
		if cur.MasterPort != 0 {
			port = cur.MasterPort // an earlier start's, which its ranks may hold already
			return nil
		}
		cur.MasterPort = port
		return model.PutJob(tx, cur)
	})
	return port, err
}

// jobFiles is what a job's tasks get of its inputs and outputs: the inputs copied in
// (a snapshot's directory, or another job's output staged from the artifacts store until
// release), and the outputs created empty. A mounted input or output is the engine's own
// directory instead, made here: an output's empty, another job's output exported once.
func (c *Core) jobFiles(ctx context.Context, j model.Job) (in []driver.TaskInput, out []driver.TaskOutput, release func(), err error) {
	var releases []func()
	release = func() {
		for _, r := range releases {
			r()
		}
	}
	for _, name := range slices.Sorted(maps.Keys(j.Inputs)) {
		input := j.Inputs[name]
		var src string
		switch {
		case input.Value != nil:
			continue
		case input.SnapshotID != "":
			if c.snapshots == nil {
				return nil, nil, release, fmt.Errorf("input %q: this engine keeps no snapshots", name)
			}
			if src, err = c.snapshots.Path(input.SnapshotID); err != nil {
				return nil, nil, release, fmt.Errorf("input %q: %w", name, err)
			}
			if input.Mode == api.ModeROMount {
				continue // the command names the snapshot's directory itself
			}
		case c.artifacts == nil:
			return nil, nil, release, fmt.Errorf("input %q: this engine keeps no artifacts store", name)
		case input.Mode == api.ModeROMount:
			if err := c.exportOnce(ctx, input.Digest, c.MountPath(j.Job, model.InputsDir, name)); err != nil {
				return nil, nil, release, fmt.Errorf("input %q: %w", name, err)
			}
			continue
		default:
			dir, done, err := c.artifacts.Stage(ctx, input.Digest)
			if err != nil {
				return nil, nil, release, fmt.Errorf("input %q: %w", name, err)
			}
			releases = append(releases, done)
			src = dir
		}
		in = append(in, driver.TaskInput{Src: src, Dest: model.InputRel(name)})
	}
	for _, name := range slices.Sorted(maps.Keys(j.Outputs)) {
		output := j.Outputs[name]
		if output.Mode == api.ModeRWMount {
			if err := os.MkdirAll(c.MountPath(j.Job, model.OutputsDir, name), 0o700); err != nil {
				return nil, nil, release, fmt.Errorf("output %q: %w", name, err)
			}
			continue
		}
		out = append(out, driver.TaskOutput{Path: model.OutputRel(name, output), File: output.Type == api.URIFile})
	}
	return in, out, release, nil
}

// exportOnce exports a stored output to dir unless an earlier start did: through a
// temporary directory renamed into place, so dir is whole or absent.
func (c *Core) exportOnce(ctx context.Context, digest, dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := c.artifacts.Export(ctx, digest, tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	return os.Rename(tmp, dir)
}

// MountPath is the engine's directory that a mounted input or output of a job is (dir is
// model.InputsDir or model.OutputsDir): an uploaded input's snapshot directory, or a
// directory of the job's own.
func (c *Core) MountPath(j api.Job, dir, name string) string {
	if dir == model.InputsDir {
		if in := j.Inputs[name]; in.SnapshotID != "" && c.snapshots != nil {
			if p, err := c.snapshots.Path(in.SnapshotID); err == nil {
				return p
			}
		}
	}
	return filepath.Join(c.JobDir(j.ID), dir, name)
}

// JobDir is the engine's directory of a job: its ranks' output, and the inputs and
// outputs a node that shares the engine's filesystem mounts.
func (c *Core) JobDir(jobID string) string { return filepath.Join(c.dataDir, "jobs", jobID) }

// JobLogPath is where a rank's output is kept once its task ended.
func (c *Core) JobLogPath(jobID string, rank int) string {
	return filepath.Join(c.JobDir(jobID), fmt.Sprintf("rank-%d.log", rank))
}

// WriteFileAtomic saves a task's output that outlives its node (a rank's log, a setup
// script's): its directory made, the file whole or absent, synced, since the node's copy
// goes with the node (package atomicfile).
func WriteFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o600)
}
