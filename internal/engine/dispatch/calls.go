package dispatch

import (
	"context"
	"io"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// The engine's API methods: each call is dispatched to the controller of its concern.

// Workspaces.

func (a *API) CreateWorkspace(ctx context.Context, spec api.WorkspaceSpec, idempotencyKey string) (*api.Workspace, error) {
	return a.c.Workspaces.CreateWorkspace(ctx, spec, idempotencyKey)
}

func (a *API) GetWorkspace(ctx context.Context, name string) (*api.Workspace, error) {
	return a.c.Workspaces.GetWorkspace(ctx, name)
}

func (a *API) ListWorkspaces(ctx context.Context) ([]api.Workspace, error) {
	return a.c.Workspaces.ListWorkspaces(ctx)
}

func (a *API) UpdateWorkspace(ctx context.Context, name string, upd api.WorkspaceUpdate) (*api.Workspace, error) {
	return a.c.Workspaces.UpdateWorkspace(ctx, name, upd)
}

func (a *API) DeleteWorkspace(ctx context.Context, name string, force bool) error {
	return a.c.Workspaces.DeleteWorkspace(ctx, name, force)
}

// Computes: created and updated by the controller of their type, read and deleted by the
// compute core (the same for every type).

func (a *API) CreateCompute(ctx context.Context, workspace string, spec api.ComputeSpec, idempotencyKey string) (*api.Compute, error) {
	switch spec.Type {
	case "", api.TypeComputeCluster:
		return a.c.Clusters.Create(ctx, workspace, spec, idempotencyKey)
	case api.TypeComputeInstance:
		return a.c.Instances.Create(ctx, workspace, spec, idempotencyKey)
	case api.TypeAttached, api.TypeKubernetes:
		return a.c.Attached.Create(ctx, workspace, spec, idempotencyKey)
	}
	return nil, api.Errorf(api.CodeInvalid, "type", "compute type %q is not supported by this engine; supported: %s, %s, %s, %s",
		spec.Type, api.TypeComputeCluster, api.TypeComputeInstance, api.TypeAttached, api.TypeKubernetes)
}

func (a *API) UpdateCompute(ctx context.Context, workspace, name string, upd api.ComputeUpdate) (*api.Compute, error) {
	typ, err := a.c.Core.Type(workspace, name)
	if err != nil {
		return nil, err
	}
	switch typ {
	case api.TypeComputeInstance:
		return a.c.Instances.Update(ctx, workspace, name, upd)
	case api.TypeAttached, api.TypeKubernetes:
		return a.c.Attached.Update(ctx, workspace, name, upd)
	}
	return a.c.Clusters.Update(ctx, workspace, name, upd)
}

func (a *API) GetCompute(ctx context.Context, workspace, name string) (*api.Compute, error) {
	return a.c.Core.GetCompute(ctx, workspace, name)
}

func (a *API) ListComputes(ctx context.Context, workspace string) ([]api.Compute, error) {
	return a.c.Core.ListComputes(ctx, workspace)
}

func (a *API) DeleteCompute(ctx context.Context, workspace, name string) error {
	return a.c.Core.DeleteCompute(ctx, workspace, name)
}

// Compute instances.

func (a *API) InstanceAction(ctx context.Context, workspace, name, action string) (*api.Compute, error) {
	return a.c.Instances.InstanceAction(ctx, workspace, name, action)
}

// ActivityTokenValid reports whether token may report activity on the instance
// workspace/name: the token its node's processes get (MLCOMPUTE_TOKEN), which allows
// nothing else.
func (a *API) ActivityTokenValid(workspace, name, token string) bool {
	return a.c.Instances.ActivityTokenValid(workspace, name, token)
}

func (a *API) ReportActivity(ctx context.Context, workspace, name string) error {
	return a.c.Instances.ReportActivity(ctx, workspace, name)
}

func (a *API) OpenSession(workspace, name string)  { a.c.Instances.OpenSession(workspace, name) }
func (a *API) CloseSession(workspace, name string) { a.c.Instances.CloseSession(workspace, name) }

func (a *API) Exec(ctx context.Context, workspace, name string, command []string, stdin io.Reader, output io.Writer) (int, error) {
	return a.c.Instances.Exec(ctx, workspace, name, command, stdin, output)
}

// Environments.

func (a *API) CreateEnvironment(ctx context.Context, workspace string, spec api.EnvironmentSpec, idempotencyKey string) (*api.Environment, error) {
	return a.c.Envs.Create(ctx, workspace, spec, idempotencyKey)
}

func (a *API) GetEnvironment(ctx context.Context, workspace, name string) (*api.Environment, error) {
	return a.c.Envs.Get(ctx, workspace, name)
}

func (a *API) ListEnvironments(ctx context.Context, workspace string) ([]api.Environment, error) {
	return a.c.Envs.List(ctx, workspace)
}

func (a *API) UpdateEnvironment(ctx context.Context, workspace, name string, upd api.EnvironmentUpdate) (*api.Environment, error) {
	return a.c.Envs.Update(ctx, workspace, name, upd)
}

func (a *API) DeleteEnvironment(ctx context.Context, workspace, name string) error {
	return a.c.Envs.Delete(ctx, workspace, name)
}

// Jobs.

// A pipeline job is submitted and canceled by the pipelines' controller, which also
// fills in its steps when it is read; its steps' jobs are jobs like any other.

func (a *API) SubmitJob(ctx context.Context, workspace string, spec api.JobSpec, idempotencyKey string) (*api.Job, error) {
	if spec.Type == api.JobTypePipeline {
		return a.c.Pipelines.Submit(ctx, workspace, spec, idempotencyKey)
	}
	return a.c.Jobs.SubmitJob(ctx, workspace, spec, idempotencyKey)
}

func (a *API) GetJob(ctx context.Context, workspace, id string) (*api.Job, error) {
	j, err := a.c.Jobs.GetJob(ctx, workspace, id)
	if err != nil {
		return nil, err
	}
	return a.c.Pipelines.Describe(ctx, j)
}

func (a *API) ListJobs(ctx context.Context, workspace string) ([]api.Job, error) {
	list, err := a.c.Jobs.ListJobs(ctx, workspace)
	for i := range list {
		if err == nil && list[i].Type == api.JobTypePipeline {
			_, err = a.c.Pipelines.Describe(ctx, &list[i])
		}
	}
	return list, err
}

func (a *API) CancelJob(ctx context.Context, workspace, id string) (*api.Job, error) {
	if a.isPipeline(ctx, workspace, id) {
		return a.c.Pipelines.Cancel(ctx, workspace, id)
	}
	return a.c.Jobs.CancelJob(ctx, workspace, id)
}

// RerunJob submits a new run of a pipeline job's definition (api.RerunRequest).
func (a *API) RerunJob(ctx context.Context, workspace, id string, req api.RerunRequest) (*api.Job, error) {
	return a.c.Pipelines.Rerun(ctx, workspace, id, req)
}

func (a *API) JobLogs(ctx context.Context, workspace, id string, rank int, offset int64) ([]byte, int64, bool, error) {
	return a.c.Jobs.JobLogs(ctx, workspace, id, rank, offset)
}

// FollowJobLogs streams a rank's output as it appears (see controllers/jobs).
func (a *API) FollowJobLogs(ctx context.Context, workspace, id string, rank int, offset int64, emit func([]byte) error) (int64, error) {
	return a.c.Jobs.FollowJobLogs(ctx, workspace, id, rank, offset, emit)
}

func (a *API) PutSnapshot(r io.Reader) (string, error) { return a.c.Jobs.PutSnapshot(r) }

// Quota.

// CheckQuota answers a planned compute cluster's or endpoint's quota check as its create or
// update would, changing nothing (api.QuotaCheck).
func (a *API) CheckQuota(ctx context.Context, workspace string, check api.QuotaCheck) error {
	switch {
	case check.Compute != nil && check.Endpoint != nil:
		return api.Errorf(api.CodeInvalid, "", "a quota check takes a compute or an endpoint, not both")
	case check.Compute != nil:
		if check.Compute.Type != "" && check.Compute.Type != api.TypeComputeCluster {
			return api.Errorf(api.CodeInvalid, "compute.type", "the quota check takes a planned %s; %s is checked on create", api.TypeComputeCluster, check.Compute.Type)
		}
		return a.c.Core.CheckQuota(ctx, workspace, check.Quotas, *check.Compute)
	case check.Endpoint != nil:
		return a.c.EndpointAPI.CheckQuota(ctx, workspace, check.Quotas, *check.Endpoint)
	}
	return api.Errorf(api.CodeInvalid, "", "a quota check takes a compute or an endpoint")
}

// Jobs' outputs.

func (a *API) DeleteJob(ctx context.Context, workspace, id string) error {
	return a.c.Jobs.DeleteJob(ctx, workspace, id)
}

// JobOutput returns a Completed job's registered output; WriteJobOutput streams it as
// a tar archive.
func (a *API) JobOutput(ctx context.Context, workspace, id, output string) (api.JobOutput, error) {
	return a.c.Jobs.JobOutput(ctx, workspace, id, output)
}

func (a *API) WriteJobOutput(ctx context.Context, w io.Writer, digest string) error {
	return a.c.Jobs.WriteOutput(ctx, w, digest)
}

// Backup writes the store's records as stateName, the artifacts they reference below
// artifactsDir and the code snapshots below snapshotsDir, as one tar archive laid out as
// the data dir (see jobs.Controller.Backup).
func (a *API) Backup(ctx context.Context, w io.Writer, stateName, artifactsDir, snapshotsDir string) error {
	return a.c.Jobs.Backup(ctx, w, stateName, artifactsDir, snapshotsDir)
}

// isPipeline reports whether a job is a pipeline job.
func (a *API) isPipeline(ctx context.Context, workspace, id string) bool {
	j, err := a.c.Jobs.GetJob(ctx, workspace, id)
	return err == nil && j.Type == api.JobTypePipeline
}
