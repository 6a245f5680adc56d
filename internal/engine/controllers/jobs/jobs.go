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
	"maps"
	"slices"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/envprep"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/environment"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/jobtimeout"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// Core is what the controller uses of the compute core (package computes).
type Core interface {
	computes.Transactions
	computes.Kicker
	computes.Tasks
	computes.Runtime
	NodeByID(tx *store.Tx, id string) (model.Node, bool)
	AddCompute(tx *store.Tx, ws *api.Workspace, rec model.Compute, quotaField string) error
	NoContainerRuntime(rec model.Compute, name string) string
}

// Controller runs jobs on the shared compute core.
type Controller struct {
	core    Core
	log     hclog.Logger
	cfg     Config
	collect collecting
}

// Config is what the controller is built with besides the compute core.
type Config struct {
	// Snapshots keeps the code snapshots jobs run (nil: none).
	Snapshots model.SnapshotStore
	// Kube places jobs on attached Kubernetes clusters (package attached); nil refuses
	// such jobs.
	Kube KubeJobs
	// SharedFilesystem says the operator's nodes see the engine's filesystem (local
	// nodes): inputs and outputs may be mounted there (ro_mount, rw_mount).
	SharedFilesystem bool
	// Artifacts is the store jobs' outputs are taken into (nil: a job with outputs fails
	// at its end, saying so); MaxOutputSize bounds each output (0: no bound).
	Artifacts     *artifacts.Store
	MaxOutputSize int64
	// AfterRankExit, when set, runs after a rank's end is applied: a job that ended may
	// have been the last user of an old environment build.
	AfterRankExit func()
}

// KubeJobs resolves and checks the instance type of a job on an attached Kubernetes
// cluster (rec) before the job is queued: some node must be able to run its pods.
type KubeJobs interface {
	KubeJob(ctx context.Context, rec model.Compute, instanceType string) (*model.KubeJob, error)
}

// New builds the controller.
func New(core Core, cfg Config) *Controller {
	return &Controller{core: core, log: core.Logger().Named("jobs"), cfg: cfg}
}

// SubmitJob queues a job and scales its compute up at once. Idempotent under the key.
func (c *Controller) SubmitJob(ctx context.Context, workspace string, spec api.JobSpec, idempotencyKey string) (*api.Job, error) {
	return c.submit(ctx, workspace, spec, idempotencyKey, "", "")
}

// SubmitStep queues the job of a pipeline's step, as SubmitJob; the job records its
// pipeline and step, so its end wakes the pipeline (model.PutJob).
func (c *Controller) SubmitStep(ctx context.Context, workspace string, spec api.JobSpec, idempotencyKey, pipeline, step string) (*api.Job, error) {
	return c.submit(ctx, workspace, spec, idempotencyKey, pipeline, step)
}

func (c *Controller) submit(ctx context.Context, workspace string, spec api.JobSpec, idempotencyKey, pipeline, step string) (*api.Job, error) {
	if spec.Type != "" && spec.Type != api.JobTypeCommand {
		return nil, api.Errorf(api.CodeInvalid, "type", "job type %q is not a command job's (allowed here: %s)", spec.Type, api.JobTypeCommand)
	}
	if len(spec.Command) == 0 {
		return nil, api.Errorf(api.CodeInvalid, "command", "a job needs a command")
	}
	if spec.InstanceCount == 0 {
		spec.InstanceCount = 1
	}
	if err := validation.InstanceCount(spec.InstanceCount); err != nil {
		return nil, err
	}
	if spec.TimeoutSeconds < 0 || spec.TimeoutSeconds > jobtimeout.MaxSeconds {
		return nil, api.Errorf(api.CodeInvalid, "timeout_seconds", "limits.timeout must be between 1 second and %d seconds (a year), or absent for no limit; got %d", jobtimeout.MaxSeconds, spec.TimeoutSeconds)
	}
	if spec.SnapshotID != "" && c.cfg.Snapshots != nil {
		if _, err := c.cfg.Snapshots.Path(spec.SnapshotID); err != nil {
			return nil, api.Errorf(api.CodeInvalid, "snapshot_id", "code snapshot %q is not known to this engine; upload it first", spec.SnapshotID)
		}
	}
	// A job on an attached Kubernetes cluster asks the cluster whether a node can run its
	// instance type first: the cluster may take seconds to answer.
	kubeJob, err := c.kubeJob(ctx, workspace, spec)
	if err != nil {
		return nil, err
	}
	now := c.core.Clock().Now().UTC()
	if spec.Name != "" && !jobNameRE.MatchString(spec.Name) {
		return nil, api.Errorf(api.CodeInvalid, "name", "job name %q must start with a letter or digit and hold only letters, digits, '_' and '-' (at most 255 characters)", spec.Name)
	}
	j := model.Job{Job: api.Job{
		Workspace: workspace, Compute: spec.Compute, Status: api.JobQueued, Nodes: []string{},
		Command: slices.Clone(spec.Command), Env: spec.Env, Count: spec.InstanceCount, SnapshotID: spec.SnapshotID, SubmittedAt: now, SubmittedBy: spec.SubmittedBy, Schedule: spec.Schedule,
		DisplayName: spec.DisplayName, ExperimentName: spec.ExperimentName, Description: spec.Description, Tags: spec.Tags, TimeoutSeconds: spec.TimeoutSeconds,
		Inputs: maps.Clone(spec.Inputs), Outputs: maps.Clone(spec.Outputs), Pipeline: pipeline, Step: step,
	}}
	err = c.core.Write(func(tx *store.Tx) error {
		ws, err := model.GetWorkspace(tx, workspace)
		if err != nil {
			return err
		}
		if prior, ok, err := model.IdempotentJob(tx, workspace, idempotencyKey); err != nil || ok {
			j = prior
			return err
		}
		if j.ID, err = c.NewJobID(tx, spec.Name); err != nil {
			return err
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
			if err := c.core.AddCompute(tx, ws, rec, "instance_type"); err != nil {
				return err
			}
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
				if j.EnvDef != nil {
					if err := c.podImage(&kubeJob.Cluster, *j.EnvDef); err != nil {
						return err
					}
				}
				// The job's pods are the nodes of a compute of its own, released at its end.
				rec = model.Compute{
					Workspace: workspace, Name: model.KubeJobComputePrefix + j.ID, Type: api.TypeComputeCluster,
					CreatedOn: now, Serverless: true, ForJob: j.ID, KubeJob: kubeJob,
					ScaleSettings: &api.ScaleSettings{MinNodeCount: 0, MaxNodeCount: spec.InstanceCount, ScaleDownNodesAfterIdleDuration: "PT0S"},
				}
				rec.ParseDurations()
				if err := c.core.AddCompute(tx, ws, rec, ""); err != nil {
					return err
				}
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
		if j.EnvDef != nil {
			if err := environment.CannotRun(j.EnvDef.Name, j.EnvDef.Definition, c.core.NoContainerRuntime(rec, spec.Compute)); err != nil {
				return api.Errorf(api.CodeInvalid, "environment", "%v", err)
			}
		}
		if err := c.prepareIO(tx, &j, rec); err != nil {
			return err
		}
		if err := model.PutJob(tx, j); err != nil {
			return err
		}
		return model.Remember(tx, idempotencyKey, j.ID, c.core.Clock().Now())
	})
	if err != nil {
		return nil, err
	}
	c.log.Info("job queued", "job", j.ID, "compute", j.ComputeKey, "instance_count", j.Count)
	c.core.Kick(j.ComputeKey)
	out := j.Job
	return &out, nil
}

// jobIDTaken reports the workspace holding a job of this ID, if any. A job's ID names its
// files in the data dir (logs, mounts), so IDs are unique across the engine's workspaces.
func jobIDTaken(tx *store.Tx, id string) (string, bool) {
	for _, ws := range tx.Keys(store.Workspaces, "") {
		if _, taken := model.GetJob(tx, ws, id); taken {
			return ws, true
		}
	}
	return "", false
}

// kubeJob resolves the instance type of a job on an attached Kubernetes cluster; nil
// for a job on any other compute (or on none that exists: the transaction says so).
func (c *Controller) kubeJob(ctx context.Context, workspace string, spec api.JobSpec) (*model.KubeJob, error) {
	if spec.Compute == api.ServerlessCompute || c.cfg.Kube == nil {
		return nil, nil
	}
	var rec model.Compute
	err := c.core.View(func(tx *store.Tx) (err error) { rec, err = model.GetCompute(tx, workspace, spec.Compute); return err })
	if err != nil || rec.Kubernetes == nil || rec.Deleting {
		return nil, nil
	}
	return c.cfg.Kube.KubeJob(ctx, rec, spec.InstanceType)
}

// GetJob returns a job.
func (c *Controller) GetJob(_ context.Context, workspace, id string) (*api.Job, error) {
	var out *api.Job
	err := c.core.View(func(tx *store.Tx) error {
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
	err := c.core.View(func(tx *store.Tx) error {
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
	var j model.Job
	err := c.core.Write(func(tx *store.Tx) error {
		var ok bool
		if j, ok = model.GetJob(tx, workspace, id); !ok {
			return model.NotFoundJob(workspace, id)
		}
		if api.Terminal(j.Status) {
			return nil
		}
		j.Finish(api.JobCanceled, nil, "canceled by user", c.core.Clock().Now().UTC())
		return model.PutJob(tx, j)
	})
	if err != nil {
		return nil, err
	}
	if len(j.Nodes) > 0 {
		c.core.Go(func() { c.core.KillJob(c.core.Lifetime(), j) })
	}
	c.core.Kick(j.ComputeKey)
	return &j.Job, nil
}

// PutSnapshot stores an uploaded code snapshot and returns its ID.
func (c *Controller) PutSnapshot(r io.Reader) (string, error) {
	if c.cfg.Snapshots == nil {
		return "", errors.New("this engine keeps no snapshots")
	}
	id, err := c.cfg.Snapshots.Put(r)
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

// podImage makes the pods of a job on an attached cluster run in the job's container
// environment, if it is one: the image by reference, or an image archive, which the
// cluster's driver imports into a node's containerd first, with a pod of the cluster's own
// image.
func (c *Controller) podImage(k *model.KubeCluster, env model.JobEnvironment) error {
	image := environment.PodImage(env.Hash, env.Definition)
	if image == "" {
		return nil
	}
	if env.Definition.Container.ImageArchive != "" {
		tc, err := envprep.Env{Definition: env.Definition, Hash: env.Hash}.Container(env.Name, c.cfg.Snapshots)
		if err != nil {
			return api.Errorf(api.CodeInvalid, "environment", "%v", err)
		}
		k.Archive = &model.KubeArchive{Path: tc.Archive, Hash: env.Hash, ImportImage: k.Image}
	}
	k.Image = image
	return nil
}
