package endpointapi

import (
	"crypto/rand"
	"encoding/base64"
	"maps"
	"slices"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/environment"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// An endpoint's record from its spec: the deployments' records with their generations,
// models and environments, and its keys.

// deploymentRecords validates snapshots and environments, fills defaults and canonical
// sizes, resolves environments to their current content hash, and carries generations over
// from the previous deployments: a deployment whose processes must change gets the next
// generation, which rolls it out.
func (a *API) deploymentRecords(tx *store.Tx, workspace string, specs map[string]api.DeploymentSpec, prev map[string]model.Deployment) (map[string]model.Deployment, error) {
	out := make(map[string]model.Deployment, len(specs))
	for _, name := range slices.Sorted(maps.Keys(specs)) {
		d := specs[name]
		size, err := validation.VMSize("deployments."+name+".instance_type", d.InstanceType, catalog.OnlineDeployment)
		if err != nil {
			return nil, err
		}
		d.InstanceType = size.Name
		if d.SnapshotID != "" && a.snapshots != nil {
			if _, err := a.snapshots.Path(d.SnapshotID); err != nil {
				return nil, api.Errorf(api.CodeInvalid, "deployments."+name+".snapshot_id", "code snapshot %q is not known to this engine; upload the code_path first", d.SnapshotID)
			}
		}
		if err := a.resolveModel(tx, workspace, "deployments."+name, &d); err != nil {
			return nil, err
		}
		validation.DefaultDeployment(&d)
		env, err := a.deploymentEnvironment(tx, workspace, "deployments."+name+".environment_id", d.EnvironmentID, d.InstanceType)
		if err != nil {
			return nil, err
		}
		rec := model.Deployment{Spec: d, Generation: 1, Env: env}
		rec.ParseDurations()
		old, hadOld := prev[name]
		if hadOld {
			rec.Generation, rec.Error = old.Generation, old.Error
			rec.Decisions, rec.StartError = old.Decisions, old.StartError
			if needsRollout(old, rec) {
				rec.Generation, rec.Error = old.Generation+1, ""
			}
		}
		if d.ScaleSettings.Autoscaled() {
			var from *model.Deployment
			if hadOld {
				from = &old
			}
			rec.Desired = initialDesired(d, from)
		}
		out[name] = rec
	}
	return out, nil
}

// resolveModel checks a deployment's model: an uploaded snapshot of a local directory, or a
// registered job output (ModelPath azureml://jobs/<job>/outputs/<output>), whose manifest
// digest it sets, refusing an unknown job or output or a job that is not Completed.
func (a *API) resolveModel(tx *store.Tx, workspace, field string, d *api.DeploymentSpec) error {
	d.ModelDigest = ""
	if strings.HasPrefix(d.ModelPath, "azureml:") {
		if d.ModelSnapshotID != "" {
			return api.Errorf(api.CodeInvalid, field+".model_snapshot_id", "a model_path that is a job's output (%s) has no snapshot", d.ModelPath)
		}
		out, err := model.ResolveJobOutput(tx, workspace, d.ModelPath)
		if err != nil {
			return api.Errorf(api.CodeOf(err), field+".model_path", "%v", err)
		}
		if a.artifacts == nil {
			return api.Errorf(api.CodeInvalid, field+".model_path", "this engine keeps no artifacts store")
		}
		d.ModelDigest = out.Digest
		return nil
	}
	if d.ModelSnapshotID != "" && a.snapshots != nil {
		if _, err := a.snapshots.Path(d.ModelSnapshotID); err != nil {
			return api.Errorf(api.CodeInvalid, field+".model_snapshot_id", "model snapshot %q is not known to this engine; upload the model_path first", d.ModelSnapshotID)
		}
	}
	return nil
}

// initialDesired is the count an autoscaled deployment starts at: its old count, within the
// new bounds, when it was running already, else min_instances.
func initialDesired(d api.DeploymentSpec, old *model.Deployment) int64 {
	sc := d.ScaleSettings
	cur := sc.MinInstances
	if old != nil {
		cur = old.Target()
	}
	return min(max(cur, sc.MinInstances), sc.MaxInstances)
}

// needsRollout reports whether a deployment's change needs new processes. Request settings,
// scale settings and probes are applied by the engine and router to running instances;
// instance_count and the autoscaler's count are met by adding or draining instances.
// A new environment, or the same one with a new content hash, needs new processes too.
func needsRollout(oldRec, curRec model.Deployment) bool {
	old, cur := oldRec.Spec, curRec.Spec
	return old.InstanceType != cur.InstanceType || old.SnapshotID != cur.SnapshotID ||
		old.ModelSnapshotID != cur.ModelSnapshotID || old.ModelDigest != cur.ModelDigest ||
		!slices.Equal(old.Command, cur.Command) || !maps.Equal(old.EnvironmentVariables, cur.EnvironmentVariables) ||
		envHash(oldRec.Env) != envHash(curRec.Env)
}

func envHash(e *model.JobEnvironment) string {
	if e == nil {
		return ""
	}
	return e.Hash
}

// deploymentEnvironment resolves a deployment's environment_id to the environment as it is
// now; nil when the deployment names none. Its instances' nodes, of instanceType, must be
// able to run it.
func (a *API) deploymentEnvironment(tx *store.Tx, workspace, field, id, instanceType string) (*model.JobEnvironment, error) {
	name, err := validation.DeploymentEnvironment(field, workspace, id)
	if err != nil || name == "" {
		return nil, err
	}
	env, err := model.GetEnvironment(tx, workspace, name)
	if api.IsNotFound(err) {
		return nil, api.Errorf(api.CodeInvalid, field, "environment %q does not exist in workspace %q; create it first (mlcompute_environment) or fix environment_id", name, workspace)
	}
	if err != nil {
		return nil, err
	}
	noRuntime := ""
	if a.noRuntime != nil {
		noRuntime = a.noRuntime(instanceType)
	}
	if err := environment.CannotRun(env.Name, env.Definition(), noRuntime); err != nil {
		return nil, api.Errorf(api.CodeInvalid, field, "%v", err)
	}
	return &model.JobEnvironment{Name: env.Name, Hash: env.ContentHash, Definition: env.Definition()}, nil
}

// newKey is a 32-byte random key, base64url without padding (43 characters).
func newKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
