package endpoints

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"maps"
	"slices"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/environment"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/rollout"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// Online endpoints: this file holds the records and the API operations. A pass (pass.go)
// decides what an endpoint's instances do next; the runtime that carries it out (and the
// scoring router's table) lives in runtime.go (probes in probes.go, events and adoption in
// events.go, ports in ports.go); every write goes through write.go; the scoring front the
// controller uses, and AML tokens, are in scoring.go.

// CreateEndpoint creates an online endpoint and starts its deployments. Idempotent under
// the key like CreateCompute.
func (c *Controller) CreateEndpoint(_ context.Context, workspace string, spec api.EndpointSpec, idempotencyKey string) (*api.Endpoint, error) {
	if err := validation.Endpoint(spec); err != nil {
		return nil, err
	}
	if spec.AuthMode == "" {
		spec.AuthMode = api.AuthModeKey
	}
	rec := model.Endpoint{
		Workspace: workspace, Name: spec.Name, AuthMode: spec.AuthMode, Description: spec.Description,
		Tags: spec.Tags, Traffic: spec.Traffic, MirrorTraffic: spec.MirrorTraffic,
		Keys:      api.EndpointKeys{PrimaryKey: newKey(), SecondaryKey: newKey()},
		CreatedOn: c.clock.Now().UTC(),
	}
	id := api.EndpointID(workspace, spec.Name)
	var undoQuota func()
	err := c.write(func(tx *store.Tx) error {
		ws, err := model.GetWorkspace(tx, workspace)
		if err != nil {
			return err
		}
		if done, err := model.Replayed(tx, idempotencyKey, id); done || err != nil {
			return err
		}
		deployments, err := c.deploymentRecords(tx, workspace, spec.Deployments, nil)
		if err != nil {
			return err
		}
		rec.Deployments = deployments
		if ok, err := tx.Get(store.Endpoints, rec.Key(), &model.Endpoint{}); err != nil {
			return err
		} else if ok {
			return api.Errorf(api.CodeConflict, "name", "online endpoint %q already exists in workspace %q; to manage it with Terraform, import it: terraform import mlcompute_online_endpoint.<name> %s", spec.Name, workspace, id)
		}
		// Scoring URIs are /{endpoint}/score on the engine's one scoring listener, so an
		// endpoint name is unique across workspaces, as it is within an Azure region.
		for _, k := range tx.Keys(store.Endpoints, "") {
			if model.NameOf(k) == spec.Name {
				return api.Errorf(api.CodeConflict, "name", "online endpoint name %q is taken by workspace %q; endpoint names are unique across the engine because they form the scoring URI", spec.Name, model.WorkspaceOf(k))
			}
		}
		if err := c.checkQuota(ws, rec.Key(), deployments, nil); err != nil {
			return err
		}
		if err := tx.Put(store.Endpoints, rec.Key(), rec); err != nil {
			return err
		}
		if err := model.Remember(tx, idempotencyKey, id, c.clock.Now()); err != nil {
			return err
		}
		undoQuota = c.holdQuota(rec.Key(), deployments)
		return nil
	}, func() {
		if undoQuota != nil {
			undoQuota()
		}
	})
	if err != nil {
		return nil, err
	}
	c.log.Info("online endpoint created", "endpoint", rec.Key(), "deployments", slices.Sorted(maps.Keys(rec.Deployments)))
	c.kick(rec.Key())
	return c.GetEndpoint(context.Background(), workspace, spec.Name)
}

// deploymentRecords validates snapshots and environments, fills defaults and canonical
// sizes, resolves environments to their current content hash, and carries generations over
// from the previous deployments: a deployment whose processes must change gets the next
// generation, which rolls it out.
func (c *Controller) deploymentRecords(tx *store.Tx, workspace string, specs map[string]api.DeploymentSpec, prev map[string]model.Deployment) (map[string]model.Deployment, error) {
	out := make(map[string]model.Deployment, len(specs))
	for _, name := range slices.Sorted(maps.Keys(specs)) {
		d := specs[name]
		size, err := validation.VMSize("deployments."+name+".instance_type", d.InstanceType, catalog.OnlineDeployment)
		if err != nil {
			return nil, err
		}
		d.InstanceType = size.Name
		if d.SnapshotID != "" && c.snapshots != nil {
			if _, err := c.snapshots.Path(d.SnapshotID); err != nil {
				return nil, api.Errorf(api.CodeInvalid, "deployments."+name+".snapshot_id", "code snapshot %q is not known to this engine; upload the code_path first", d.SnapshotID)
			}
		}
		if err := c.resolveModel(tx, workspace, "deployments."+name, &d); err != nil {
			return nil, err
		}
		validation.DefaultDeployment(&d)
		env, err := c.deploymentEnvironment(tx, workspace, "deployments."+name+".environment_id", d.EnvironmentID, d.InstanceType)
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
func (c *Controller) resolveModel(tx *store.Tx, workspace, field string, d *api.DeploymentSpec) error {
	d.ModelDigest = ""
	if strings.HasPrefix(d.ModelPath, "azureml:") {
		if d.ModelSnapshotID != "" {
			return api.Errorf(api.CodeInvalid, field+".model_snapshot_id", "a model_path that is a job's output (%s) has no snapshot", d.ModelPath)
		}
		out, err := model.ResolveJobOutput(tx, workspace, d.ModelPath)
		if err != nil {
			return api.Errorf(api.CodeOf(err), field+".model_path", "%v", err)
		}
		if c.artifacts == nil {
			return api.Errorf(api.CodeInvalid, field+".model_path", "this engine keeps no artifacts store")
		}
		d.ModelDigest = out.Digest
		return nil
	}
	if d.ModelSnapshotID != "" && c.snapshots != nil {
		if _, err := c.snapshots.Path(d.ModelSnapshotID); err != nil {
			return api.Errorf(api.CodeInvalid, field+".model_snapshot_id", "model snapshot %q is not known to this engine; upload the model_path first", d.ModelSnapshotID)
		}
	}
	return nil
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
func (c *Controller) deploymentEnvironment(tx *store.Tx, workspace, field, id, instanceType string) (*model.JobEnvironment, error) {
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
	if c.noRuntime != nil {
		noRuntime = c.noRuntime(instanceType)
	}
	if err := environment.CannotRun(env.Name, env.Definition(), noRuntime); err != nil {
		return nil, api.Errorf(api.CodeInvalid, field, "%v", err)
	}
	return &model.JobEnvironment{Name: env.Name, Hash: env.ContentHash, Definition: env.Definition()}, nil
}

// EnvironmentChanged rolls out every deployment of the workspace that runs in the named
// environment and is not on its current content hash yet: an environment update is a new
// generation of the deployments that use it. A deleted environment changes nothing: its
// deployments keep the build they run in.
func (c *Controller) EnvironmentChanged(workspace, name string) {
	id := api.EnvironmentID(workspace, name)
	var changed []string
	err := c.write(func(tx *store.Tx) error {
		env, err := model.GetEnvironment(tx, workspace, name)
		if err != nil {
			return err
		}
		eps, err := store.List[model.Endpoint](tx, store.Endpoints, workspace+"/")
		if err != nil {
			return err
		}
		for _, rec := range eps {
			dirty := false
			for dn, d := range rec.Deployments {
				if d.Spec.EnvironmentID != id || envHash(d.Env) == env.ContentHash {
					continue
				}
				d.Env = &model.JobEnvironment{Name: env.Name, Hash: env.ContentHash, Definition: env.Definition()}
				d.Generation, d.Error = d.Generation+1, ""
				rec.Deployments[dn], dirty = d, true
			}
			if dirty && !rec.Deleting {
				changed = append(changed, rec.Key())
				if err := tx.Put(store.Endpoints, rec.Key(), rec); err != nil {
					return err
				}
			}
		}
		return nil
	}, nil)
	if err != nil && !api.IsNotFound(err) {
		c.log.Error("rolling out deployments of a changed environment failed", "environment", id, "error", err)
		return
	}
	for _, key := range changed {
		c.log.Info("environment changed; rolling out its deployments", "endpoint", key, "environment", id)
		c.kick(key)
	}
}

// UpdateEndpoint replaces an endpoint's mutable fields. Changed deployments roll out:
// their new instances start and pass readiness before the old ones stop taking traffic,
// and a new split applies only once the deployments it sends to have rolled out.
func (c *Controller) UpdateEndpoint(_ context.Context, workspace, name string, upd api.EndpointUpdate) (*api.Endpoint, error) {
	if err := validation.EndpointUpdate(upd); err != nil {
		return nil, err
	}
	if upd.AuthMode == "" {
		upd.AuthMode = api.AuthModeKey
	}
	var undoQuota func()
	err := c.write(func(tx *store.Tx) error {
		rec, err := model.GetEndpoint(tx, workspace, name)
		if err != nil {
			return err
		}
		if rec.Deleting {
			return api.Errorf(api.CodeConflict, "", "online endpoint %q is being deleted", name)
		}
		// A retiring deployment declared again continues from its generation.
		prev := maps.Clone(rec.Retiring)
		if prev == nil {
			prev = map[string]model.Deployment{}
		}
		maps.Copy(prev, rec.Deployments)
		deployments, err := c.deploymentRecords(tx, workspace, upd.Deployments, prev)
		if err != nil {
			return err
		}
		ws, err := model.GetWorkspace(tx, workspace)
		if err != nil {
			return err
		}
		if err := c.checkQuota(ws, rec.Key(), deployments, rec.Deployments); err != nil {
			return err
		}
		for name, d := range prev {
			if _, kept := deployments[name]; !kept && rec.LiveTraffic[name] > 0 {
				if rec.Retiring == nil {
					rec.Retiring = map[string]model.Deployment{}
				}
				rec.Retiring[name] = d
			} else {
				delete(rec.Retiring, name)
			}
		}
		rec.AuthMode, rec.Description, rec.Tags = upd.AuthMode, upd.Description, upd.Tags
		rec.Deployments, rec.Traffic, rec.MirrorTraffic = deployments, upd.Traffic, upd.MirrorTraffic
		rollout.MoveTraffic(&rec)
		// Auth and request settings apply when the call returns, and so does the split
		// when the deployments it sends to are rolled out already; otherwise it moves once
		// they are. The router gets them before the commit, as in Reconcile.
		c.pushRouter(rec)
		if err := tx.Put(store.Endpoints, rec.Key(), rec); err != nil {
			return err
		}
		undoQuota = c.holdQuota(rec.Key(), rec.Deployments)
		return nil
	}, func() {
		c.syncRouter(workspace + "/" + name)
		if undoQuota != nil {
			undoQuota()
		}
	})
	if err != nil {
		return nil, err
	}
	c.log.Info("online endpoint updated", "endpoint", workspace+"/"+name)
	c.kick(workspace + "/" + name)
	return c.GetEndpoint(context.Background(), workspace, name)
}

// GetEndpoint returns an endpoint with its deployments' instances.
func (c *Controller) GetEndpoint(_ context.Context, workspace, name string) (*api.Endpoint, error) {
	var out *api.Endpoint
	err := c.store.View(func(tx *store.Tx) error {
		rec, err := model.GetEndpoint(tx, workspace, name)
		if err != nil {
			return err
		}
		ep := c.describeEndpoint(rec)
		out = &ep
		return nil
	})
	return out, err
}

// ListEndpoints returns a workspace's endpoints, sorted by name.
func (c *Controller) ListEndpoints(_ context.Context, workspace string) ([]api.Endpoint, error) {
	var out []api.Endpoint
	err := c.store.View(func(tx *store.Tx) error {
		if _, err := model.GetWorkspace(tx, workspace); err != nil {
			return err
		}
		recs, err := store.List[model.Endpoint](tx, store.Endpoints, workspace+"/")
		for _, rec := range recs {
			out = append(out, c.describeEndpoint(rec))
		}
		return err
	})
	slices.SortFunc(out, func(a, b api.Endpoint) int { return strings.Compare(a.Name, b.Name) })
	return out, err
}

// DeleteEndpoint stops taking requests for the endpoint, terminates every instance and
// deletes it. It returns once every instance is confirmed gone, or with an unavailable
// error when ctx ends first (the delete goes on, and resumes after an engine restart).
func (c *Controller) DeleteEndpoint(ctx context.Context, workspace, name string) error {
	key := workspace + "/" + name
	err := c.write(func(tx *store.Tx) error {
		rec, err := model.GetEndpoint(tx, workspace, name)
		if err != nil || rec.Deleting {
			return err
		}
		rec.Deleting = true
		return tx.Put(store.Endpoints, key, rec)
	}, nil)
	if err != nil {
		return err
	}
	c.log.Info("online endpoint deleting", "endpoint", key)
	return c.awaitDeleted(ctx, []string{key})
}

// DeleteWorkspace deletes every endpoint of a workspace that is being deleted (its
// force_destroy) and returns once their instances are all stopped.
func (c *Controller) DeleteWorkspace(ctx context.Context, workspace string) error {
	var keys []string
	err := c.write(func(tx *store.Tx) error {
		eps, err := store.List[model.Endpoint](tx, store.Endpoints, workspace+"/")
		for _, rec := range eps {
			keys = append(keys, rec.Key())
			if !rec.Deleting {
				rec.Deleting = true
				if err := tx.Put(store.Endpoints, rec.Key(), rec); err != nil {
					return err
				}
			}
		}
		return err
	}, nil)
	if err != nil {
		return err
	}
	return c.awaitDeleted(ctx, keys)
}

// awaitDeleted kicks the endpoints and waits until their records are gone.
func (c *Controller) awaitDeleted(ctx context.Context, keys []string) error {
	objs := make([]runtime.Key, len(keys))
	for i, k := range keys {
		objs[i] = runtime.EndpointKey(k)
	}
	if k, ok := c.loop.AwaitDeleted(ctx, objs); !ok {
		return api.Errorf(api.CodeUnavailable, "", "online endpoint %s is still stopping its instances; the delete goes on in the background, try again to wait for it", k.Name)
	}
	return nil
}

// GetEndpointKeys returns an endpoint's keys.
func (c *Controller) GetEndpointKeys(_ context.Context, workspace, name string) (*api.EndpointKeys, error) {
	var keys api.EndpointKeys
	err := c.store.View(func(tx *store.Tx) error {
		rec, err := model.GetEndpoint(tx, workspace, name)
		keys = rec.Keys
		return err
	})
	if err != nil {
		return nil, err
	}
	return &keys, nil
}

// RegenerateEndpointKeys replaces one key; the other keeps working, so clients can move
// to the new key without downtime.
func (c *Controller) RegenerateEndpointKeys(_ context.Context, workspace, name, keyType string) (*api.EndpointKeys, error) {
	if err := validation.KeyType(keyType); err != nil {
		return nil, err
	}
	var keys api.EndpointKeys
	err := c.write(func(tx *store.Tx) error {
		rec, err := model.GetEndpoint(tx, workspace, name)
		if err != nil {
			return err
		}
		if keyType == api.KeyPrimary {
			rec.Keys.PrimaryKey = newKey()
		} else {
			rec.Keys.SecondaryKey = newKey()
		}
		keys = rec.Keys
		if !rec.Deleting {
			// The old key stops working when the call returns. The router gets the new one
			// before the commit, as in Reconcile.
			c.pushRouter(rec)
		}
		return tx.Put(store.Endpoints, rec.Key(), rec)
	}, func() { c.syncRouter(workspace + "/" + name) })
	if err != nil {
		return nil, err
	}
	c.log.Info("online endpoint key regenerated", "endpoint", workspace+"/"+name, "key_type", keyType)
	c.kick(workspace + "/" + name)
	return &keys, nil
}

// newKey is a 32-byte random key, base64url without padding (43 characters).
func newKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// describeEndpoint is an endpoint as the API shows it.
func (c *Controller) describeEndpoint(rec model.Endpoint) api.Endpoint {
	out := api.Endpoint{
		ID: api.EndpointID(rec.Workspace, rec.Name), Workspace: rec.Workspace, Name: rec.Name,
		AuthMode: rec.AuthMode, Description: rec.Description, Tags: rec.Tags,
		Traffic: rec.Traffic, MirrorTraffic: rec.MirrorTraffic, LiveTraffic: rec.LiveTraffic, CreatedOn: rec.CreatedOn,
		Deployments: map[string]api.Deployment{},
	}
	if base := c.scoring.BaseURL(); base != "" {
		out.ScoringURI = base + router.ScoringPath(rec.Name)
	}
	var errs []string
	stats := c.scoring.Stats(rec.Name)
	for _, name := range slices.Sorted(maps.Keys(rec.Deployments)) {
		d := rec.Deployments[name]
		ad := api.Deployment{DeploymentSpec: d.Spec, Generation: d.Generation, Instances: []api.EndpointInstance{},
			DesiredInstances: d.Target(), ScaleDecisions: d.Decisions}
		if st, ok := stats[name]; ok {
			ad.RequestsInFlight, ad.HeldRequests = st.InFlight, st.Held
		}
		for _, in := range rec.Instances {
			if in.Deployment != name {
				continue
			}
			ad.Instances = append(ad.Instances, api.EndpointInstance{ID: in.ID, State: in.State, Generation: in.Generation, Restarts: in.Restarts, StartedAt: in.StartedAt})
			if in.Generation == d.Generation && in.State == api.EndpointInstanceReady {
				ad.ReadyInstances++
			}
		}
		out.Deployments[name] = ad
		if d.Error != "" {
			errs = append(errs, "deployment "+name+": "+d.Error)
		}
	}
	switch {
	case rec.Deleting:
		out.ProvisioningState = api.ProvisioningDeleting
	case len(errs) > 0:
		out.ProvisioningState, out.Error = api.ProvisioningFailed, strings.Join(errs, "; ")
	case !rec.Provisioned:
		out.ProvisioningState = api.ProvisioningCreating
	case !rollout.Settled(rec):
		out.ProvisioningState = api.ProvisioningUpdating
	default:
		out.ProvisioningState = api.ProvisioningSucceeded
	}
	return out
}
