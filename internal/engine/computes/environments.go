package computes

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/envprep"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/environment"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// Environments (DESIGN 8) are prepared on a job's nodes before its tasks start: a
// system-managed one is built (or found) in the node's cache by a task, a user-managed one's
// interpreter is checked by a task. Both go through the driver's TaskRunner, so they work
// wherever jobs run; their output is part of the job's log, and their ends go to the jobs
// controller, which owns them (owners.go).

// ReasonBuilding is a Preparing job's reason while its environment is built on its nodes.
const ReasonBuilding = "building environment"

// ReasonChecking is a Preparing job's reason while its interpreter is looked for.
const ReasonChecking = "checking the environment's interpreter"

// jobCompute is the compute record of a job's nodes (a zero record once it is gone).
func (c *Core) jobCompute(j model.Job) model.Compute {
	var rec model.Compute
	_ = c.store.View(func(tx *store.Tx) error {
		_, err := tx.Get(store.Computes, j.ComputeKey, &rec)
		return err
	})
	return rec
}

// envCache is the environment cache of a job on nodes of compute rec: the engine's, shared
// by every local node of this machine, or "" (the machine's own, in its home) for attached
// machines and other drivers.
func (c *Core) envCache(rec model.Compute) string {
	if c.envCacheDir == "" || rec.Attached != nil || rec.KubeJob != nil {
		return ""
	}
	return c.envCacheDir
}

// NoContainerRuntime says why the nodes of compute rec (named name in the job's request)
// cannot run a job in a container image, or is "" when they can (environment.CannotRun):
// the engine's own nodes when ownNodesRunNoImages says nothing (but for GPU sizes on its
// Kubernetes pods, podGPUsLost), attached machines (each machine's own containerd, found
// when the task starts), and attached Kubernetes clusters (the job's pods are of the
// image).
func (c *Core) NoContainerRuntime(rec model.Compute, name string) string {
	switch {
	case rec.Kubernetes != nil || rec.KubeJob != nil:
		return "" // the job's pods run the image (environment.PodImage)
	case rec.Attached != nil:
		if !c.attachedContainers {
			return fmt.Sprintf("compute %q is an attached machine, and this engine runs images on attached machines with its own binary, "+
				"which is not a Linux one", name)
		}
		return ""
	}
	if why := c.podGPUsLost(rec.VMSize); why != "" {
		return fmt.Sprintf("compute %q is %s: run the job on an attached Kubernetes cluster (mlcompute_attached_compute.kubernetes), "+
			"whose job pods are of the image and get the GPUs", name, why)
	}
	return c.ownNodesRunNoImages()
}

// NoDeploymentRuntime says why the engine's own nodes of a deployment's instance type,
// which its instances run on, cannot run a container image, or is "" when they can.
func (c *Core) NoDeploymentRuntime(instanceType string) string {
	if why := c.podGPUsLost(instanceType); why != "" {
		return "the deployment's instance type is " + why + ": give the deployment an environment of the python or user_managed kind, or a size without GPUs"
	}
	return c.ownNodesRunNoImages()
}

// podGPUsLost says, for a size with GPUs on the engine's own Kubernetes pods, that an
// image's container would not get them (the device plugin gives them to the node's own
// container; an ephemeral container has no resources), or is "".
func (c *Core) podGPUsLost(vmSize string) string {
	size, ok := catalog.Lookup(vmSize)
	if !c.containers || !c.podNodes || !ok || size.GPUs == 0 {
		return ""
	}
	return fmt.Sprintf("of size %s, whose GPUs (%d) this engine's Kubernetes pods give to the node's own container, "+
		"not to the container an image runs in", size.Name, size.GPUs)
}

// ownNodesRunNoImages says why the engine's own nodes cannot run container images, or is
// "" when they can: local nodes when their driver has a containerd, Slurm nodes from an
// engine on Linux, Kubernetes pods.
func (c *Core) ownNodesRunNoImages() string {
	switch {
	case c.containers:
		return ""
	case c.local:
		return "this engine's local nodes have no container runtime: start `mlcompute serve` with --containerd-address, " +
			"or, for the engine the provider and the CLI start, run containerd (Debian package containerd) at " + containerrt.DefaultAddress +
			" or name its socket in " + containerrt.AddressEnv
	}
	return "this engine's nodes do not run container environments: Slurm nodes do only from an engine that runs on Linux"
}

// nodeEnvOn is a job's environment as its nodes, of compute rec, need it.
func (c *Core) nodeEnvOn(j model.Job, rec model.Compute) envprep.Env {
	if j.EnvDef == nil {
		return envprep.Env{}
	}
	return envprep.Env{Definition: j.EnvDef.Definition, Hash: j.EnvDef.Hash, Cache: c.envCache(rec)}
}

// taskContainer is the image a job's task runs in on nodes of compute rec: the
// environment's, except on an attached Kubernetes cluster, whose pods are of the image
// already (environment.PodImage).
func (c *Core) taskContainer(j model.Job, rec model.Compute, env envprep.Env) (*driver.TaskContainer, error) {
	if j.EnvDef == nil || rec.KubeJob != nil {
		return nil, nil
	}
	return env.Container(j.EnvDef.Name, c.snapshots)
}

// envTask is the preparation task of a job's environment on one node (in its image, for a
// Python environment built on top of one).
func (c *Core) envTask(j model.Job, rank int) (driver.TaskSpec, error) {
	rec := c.jobCompute(j)
	env := c.nodeEnvOn(j, rec)
	spec := driver.TaskSpec{Key: j.EnvTaskKey(rank), Env: map[string]string{}}
	spec.Command = env.Prepare(spec.Env)
	var err error
	spec.Container, err = c.taskContainer(j, rec, env)
	return spec, err
}

// wrapTask puts the job's environment first on the task's PATH, and has the task run in the
// environment's image when it has one.
func (c *Core) wrapTask(j model.Job, spec *driver.TaskSpec) error {
	rec := c.jobCompute(j)
	env := c.nodeEnvOn(j, rec)
	spec.Command = env.Wrap(spec.Command, spec.Env)
	var err error
	spec.Container, err = c.taskContainer(j, rec, env)
	return err
}

// prepareEnvironment starts the preparation of a job's environment on the nodes where it
// has not ended yet, and reports whether the job must wait for it (the tasks' exits come
// go to the jobs controller, their owner (owners.go), which then starts the job). A
// preparation task that ended while the engine was down is applied at once.
func (c *Core) prepareEnvironment(ctx context.Context, j model.Job) (wait bool) {
	if j.EnvDef == nil || j.EnvReady() {
		return false
	}
	if step := environment.StepFor(&j.EnvDef.Definition); step == environment.None || step == environment.InContainer {
		return false // an image is imported or pulled by the task that runs in it
	}
	reason := ReasonBuilding
	if environment.StepFor(&j.EnvDef.Definition) == environment.Check {
		reason = ReasonChecking
	}
	_ = c.Write(func(tx *store.Tx) error {
		cur, ok := model.GetJob(tx, j.Workspace, j.ID)
		if !ok || cur.Status != api.JobPreparing || cur.Attempt != j.Attempt || cur.Preparing == reason {
			return nil
		}
		cur.Preparing = reason
		return model.PutJob(tx, cur)
	})
	var err error
	for rank, node := range j.Nodes {
		if _, done := j.EnvExits[rank]; done && j.EnvAttempt == j.Attempt {
			continue
		}
		spec, serr := c.envTask(j, rank)
		if serr != nil {
			err = serr
			break
		}
		st, serr := c.tasks.TaskStatus(ctx, node, spec.Key)
		switch {
		case serr == nil && !st.Running:
			c.loop.Go(func() { c.taskExited(ctx, node, spec.Key, st.ExitCode) })
			continue
		case serr == nil:
			continue
		}
		if err = c.tasks.StartTask(ctx, node, spec); err != nil {
			err = fmt.Errorf("starting the environment's preparation on node %s: %w", node, err)
			break
		}
	}
	if err != nil && ctx.Err() == nil {
		c.failPreparing(j, err.Error())
		c.KillJob(ctx, j)
		c.FreeNodes(j)
		return true
	}
	if err == nil {
		c.log.Info("preparing job environment", "job", j.ID, "environment", j.EnvDef.Name, "content_hash", j.EnvDef.Hash, "nodes", strings.Join(j.Nodes, ","))
	}
	return true
}

// failPreparing fails a job that is still Preparing.
func (c *Core) failPreparing(j model.Job, why string) {
	_ = c.Write(func(tx *store.Tx) error {
		cur, ok := model.GetJob(tx, j.Workspace, j.ID)
		if !ok || cur.Status != api.JobPreparing {
			return nil
		}
		cur.Preparing = ""
		cur.Finish(api.JobFailed, nil, why, c.clock.Now().UTC())
		return model.PutJob(tx, cur)
	})
}

// EnvLogPath is where a rank's environment preparation output is kept once it ended; it
// opens the rank's job log.
func (c *Core) EnvLogPath(jobID string, rank int) string {
	return filepath.Join(c.JobDir(jobID), fmt.Sprintf("env-rank-%d.log", rank))
}

// LastLines returns the last n non-empty lines of out, for error messages.
func LastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	var keep []string
	for i := len(lines) - 1; i >= 0 && len(keep) < n; i-- {
		if l := strings.TrimRight(lines[i], "\r "); l != "" {
			keep = append([]string{l}, keep...)
		}
	}
	return strings.Join(keep, "\n")
}
