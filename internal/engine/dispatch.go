package engine

import (
	"context"
	"io"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// The engine's API methods: each call is dispatched to the controller of its concern.

// Workspaces.

func (e *Engine) CreateWorkspace(ctx context.Context, spec api.WorkspaceSpec, idempotencyKey string) (*api.Workspace, error) {
	return e.workspaces.CreateWorkspace(ctx, spec, idempotencyKey)
}

func (e *Engine) GetWorkspace(ctx context.Context, name string) (*api.Workspace, error) {
	return e.workspaces.GetWorkspace(ctx, name)
}

func (e *Engine) ListWorkspaces(ctx context.Context) ([]api.Workspace, error) {
	return e.workspaces.ListWorkspaces(ctx)
}

func (e *Engine) UpdateWorkspace(ctx context.Context, name string, upd api.WorkspaceUpdate) (*api.Workspace, error) {
	return e.workspaces.UpdateWorkspace(ctx, name, upd)
}

func (e *Engine) DeleteWorkspace(ctx context.Context, name string, force bool) error {
	return e.workspaces.DeleteWorkspace(ctx, name, force)
}

// Computes: created and updated by the controller of their type, read and deleted by the
// compute core (the same for every type).

func (e *Engine) CreateCompute(ctx context.Context, workspace string, spec api.ComputeSpec, idempotencyKey string) (*api.Compute, error) {
	switch spec.Type {
	case "", api.TypeComputeCluster:
		return e.clusters.Create(ctx, workspace, spec, idempotencyKey)
	case api.TypeComputeInstance:
		return e.instances.Create(ctx, workspace, spec, idempotencyKey)
	case api.TypeAttached, api.TypeKubernetes:
		return e.attached.Create(ctx, workspace, spec, idempotencyKey)
	}
	return nil, api.Errorf(api.CodeInvalid, "type", "compute type %q is not supported by this engine; supported: %s, %s, %s, %s",
		spec.Type, api.TypeComputeCluster, api.TypeComputeInstance, api.TypeAttached, api.TypeKubernetes)
}

func (e *Engine) UpdateCompute(ctx context.Context, workspace, name string, upd api.ComputeUpdate) (*api.Compute, error) {
	typ, err := e.core.Type(workspace, name)
	if err != nil {
		return nil, err
	}
	switch typ {
	case api.TypeComputeInstance:
		return e.instances.Update(ctx, workspace, name, upd)
	case api.TypeAttached, api.TypeKubernetes:
		return e.attached.Update(ctx, workspace, name, upd)
	}
	return e.clusters.Update(ctx, workspace, name, upd)
}

func (e *Engine) GetCompute(ctx context.Context, workspace, name string) (*api.Compute, error) {
	return e.core.GetCompute(ctx, workspace, name)
}

func (e *Engine) ListComputes(ctx context.Context, workspace string) ([]api.Compute, error) {
	return e.core.ListComputes(ctx, workspace)
}

func (e *Engine) DeleteCompute(ctx context.Context, workspace, name string) error {
	return e.core.DeleteCompute(ctx, workspace, name)
}

// Compute instances.

func (e *Engine) InstanceAction(ctx context.Context, workspace, name, action string) (*api.Compute, error) {
	return e.instances.InstanceAction(ctx, workspace, name, action)
}

// ActivityTokenValid reports whether token may report activity on the instance
// workspace/name: the token its node's processes get (MLCOMPUTE_TOKEN), which allows
// nothing else.
func (e *Engine) ActivityTokenValid(workspace, name, token string) bool {
	return e.instances.ActivityTokenValid(workspace, name, token)
}

func (e *Engine) ReportActivity(ctx context.Context, workspace, name string) error {
	return e.instances.ReportActivity(ctx, workspace, name)
}

func (e *Engine) OpenSession(workspace, name string)  { e.instances.OpenSession(workspace, name) }
func (e *Engine) CloseSession(workspace, name string) { e.instances.CloseSession(workspace, name) }

func (e *Engine) Exec(ctx context.Context, workspace, name string, command []string, stdin io.Reader, output io.Writer) (int, error) {
	return e.instances.Exec(ctx, workspace, name, command, stdin, output)
}

// Environments.

func (e *Engine) CreateEnvironment(ctx context.Context, workspace string, spec api.EnvironmentSpec, idempotencyKey string) (*api.Environment, error) {
	return e.envs.Create(ctx, workspace, spec, idempotencyKey)
}

func (e *Engine) GetEnvironment(ctx context.Context, workspace, name string) (*api.Environment, error) {
	return e.envs.Get(ctx, workspace, name)
}

func (e *Engine) ListEnvironments(ctx context.Context, workspace string) ([]api.Environment, error) {
	return e.envs.List(ctx, workspace)
}

func (e *Engine) UpdateEnvironment(ctx context.Context, workspace, name string, upd api.EnvironmentUpdate) (*api.Environment, error) {
	return e.envs.Update(ctx, workspace, name, upd)
}

func (e *Engine) DeleteEnvironment(ctx context.Context, workspace, name string) error {
	return e.envs.Delete(ctx, workspace, name)
}

// Jobs.

// A pipeline job is submitted and canceled by the pipelines' controller, which also
// fills in its steps when it is read; its steps' jobs are jobs like any other.

func (e *Engine) SubmitJob(ctx context.Context, workspace string, spec api.JobSpec, idempotencyKey string) (*api.Job, error) {
	if spec.Type == api.JobTypePipeline {
		return e.pipelines.Submit(ctx, workspace, spec, idempotencyKey)
	}
	return e.jobs.SubmitJob(ctx, workspace, spec, idempotencyKey)
}

func (e *Engine) GetJob(ctx context.Context, workspace, id string) (*api.Job, error) {
	j, err := e.jobs.GetJob(ctx, workspace, id)
	if err != nil {
		return nil, err
	}
	return e.pipelines.Describe(ctx, j)
}

func (e *Engine) ListJobs(ctx context.Context, workspace string) ([]api.Job, error) {
	list, err := e.jobs.ListJobs(ctx, workspace)
	for i := range list {
		if err == nil && list[i].Type == api.JobTypePipeline {
			_, err = e.pipelines.Describe(ctx, &list[i])
		}
	}
	return list, err
}

func (e *Engine) CancelJob(ctx context.Context, workspace, id string) (*api.Job, error) {
	if e.isPipeline(ctx, workspace, id) {
		return e.pipelines.Cancel(ctx, workspace, id)
	}
	return e.jobs.CancelJob(ctx, workspace, id)
}

// RerunJob submits a new run of a pipeline job's definition (api.RerunRequest).
func (e *Engine) RerunJob(ctx context.Context, workspace, id string, req api.RerunRequest) (*api.Job, error) {
	return e.pipelines.Rerun(ctx, workspace, id, req)
}

func (e *Engine) JobLogs(ctx context.Context, workspace, id string, rank int, offset int64) ([]byte, int64, bool, error) {
	return e.jobs.JobLogs(ctx, workspace, id, rank, offset)
}

// FollowJobLogs streams a rank's output as it appears (see controllers/jobs).
func (e *Engine) FollowJobLogs(ctx context.Context, workspace, id string, rank int, offset int64, emit func([]byte) error) (int64, error) {
	return e.jobs.FollowJobLogs(ctx, workspace, id, rank, offset, emit)
}

func (e *Engine) PutSnapshot(r io.Reader) (string, error) { return e.jobs.PutSnapshot(r) }

// Quota.

// CheckQuota answers a planned compute cluster's or endpoint's quota check as its create or
// update would, changing nothing (api.QuotaCheck).
func (e *Engine) CheckQuota(ctx context.Context, workspace string, check api.QuotaCheck) error {
	switch {
	case check.Compute != nil && check.Endpoint != nil:
		return api.Errorf(api.CodeInvalid, "", "a quota check takes a compute or an endpoint, not both")
	case check.Compute != nil:
		if check.Compute.Type != "" && check.Compute.Type != api.TypeComputeCluster {
			return api.Errorf(api.CodeInvalid, "compute.type", "the quota check takes a planned %s; %s is checked on create", api.TypeComputeCluster, check.Compute.Type)
		}
		return e.core.CheckQuota(ctx, workspace, check.Quotas, *check.Compute)
	case check.Endpoint != nil:
		return e.endpointAPI.CheckQuota(ctx, workspace, check.Quotas, *check.Endpoint)
	}
	return api.Errorf(api.CodeInvalid, "", "a quota check takes a compute or an endpoint")
}

// Jobs' outputs.

func (e *Engine) DeleteJob(ctx context.Context, workspace, id string) error {
	return e.jobs.DeleteJob(ctx, workspace, id)
}

// JobOutput returns a Completed job's registered output; WriteJobOutput streams it as
// a tar archive.
func (e *Engine) JobOutput(ctx context.Context, workspace, id, output string) (api.JobOutput, error) {
	return e.jobs.JobOutput(ctx, workspace, id, output)
}

func (e *Engine) WriteJobOutput(ctx context.Context, w io.Writer, digest string) error {
	return e.jobs.WriteOutput(ctx, w, digest)
}

// Backup writes the store's records as stateName, the artifacts they reference below
// artifactsDir and the code snapshots below snapshotsDir, as one tar archive laid out as
// the data dir (see jobs.Controller.Backup).
func (e *Engine) Backup(ctx context.Context, w io.Writer, stateName, artifactsDir, snapshotsDir string) error {
	return e.jobs.Backup(ctx, w, stateName, artifactsDir, snapshotsDir)
}

// collectArtifacts removes the blobs no job references, once at start: what an intake
// the engine was killed in wrote goes here.
func (e *Engine) collectArtifacts() {
	if _, _, err := e.jobs.CollectArtifacts(); err != nil {
		e.log.Error("collecting artifacts failed", "error", err)
	}
}
