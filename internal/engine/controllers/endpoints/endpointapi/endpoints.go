package endpointapi

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/rollout"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// CreateEndpoint creates an online endpoint and starts its deployments. Idempotent under
// the key like CreateCompute.
func (a *API) CreateEndpoint(_ context.Context, workspace string, spec api.EndpointSpec, idempotencyKey string) (*api.Endpoint, error) {
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
		CreatedOn: a.clock.Now().UTC(),
	}
	id := api.EndpointID(workspace, spec.Name)
	var undoQuota func()
	err := a.write(func(tx *store.Tx) error {
		ws, err := model.GetWorkspace(tx, workspace)
		if err != nil {
			return err
		}
		if done, err := model.Replayed(tx, idempotencyKey, id); done || err != nil {
			return err
		}
		deployments, err := a.deploymentRecords(tx, workspace, spec.Deployments, nil)
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
		if err := a.checkQuota(ws, rec.Key(), deployments, nil); err != nil {
			return err
		}
		if err := tx.Put(store.Endpoints, rec.Key(), rec); err != nil {
			return err
		}
		if err := model.Remember(tx, idempotencyKey, id, a.clock.Now()); err != nil {
			return err
		}
		undoQuota = a.holdQuota(rec.Key(), deployments)
		return nil
	}, func() {
		if undoQuota != nil {
			undoQuota()
		}
	})
	if err != nil {
		return nil, err
	}
	a.log.Info("online endpoint created", "endpoint", rec.Key(), "deployments", slices.Sorted(maps.Keys(rec.Deployments)))
	a.kick(rec.Key())
	return a.GetEndpoint(context.Background(), workspace, spec.Name)
}

// EnvironmentChanged rolls out every deployment of the workspace that runs in the named
// environment and is not on its current content hash yet: an environment update is a new
// generation of the deployments that use it. A deleted environment changes nothing: its
// deployments keep the build they run in.
func (a *API) EnvironmentChanged(workspace, name string) {
	id := api.EnvironmentID(workspace, name)
	var changed []string
	err := a.write(func(tx *store.Tx) error {
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
		a.log.Error("rolling out deployments of a changed environment failed", "environment", id, "error", err)
		return
	}
	for _, key := range changed {
		a.log.Info("environment changed; rolling out its deployments", "endpoint", key, "environment", id)
		a.kick(key)
	}
}

// UpdateEndpoint replaces an endpoint's mutable fields. Changed deployments roll out:
// their new instances start and pass readiness before the old ones stop taking traffic,
// and a new split applies only once the deployments it sends to have rolled out.
func (a *API) UpdateEndpoint(_ context.Context, workspace, name string, upd api.EndpointUpdate) (*api.Endpoint, error) {
	if err := validation.EndpointUpdate(upd); err != nil {
		return nil, err
	}
	if upd.AuthMode == "" {
		upd.AuthMode = api.AuthModeKey
	}
	var undoQuota func()
	err := a.write(func(tx *store.Tx) error {
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
		deployments, err := a.deploymentRecords(tx, workspace, upd.Deployments, prev)
		if err != nil {
			return err
		}
		ws, err := model.GetWorkspace(tx, workspace)
		if err != nil {
			return err
		}
		if err := a.checkQuota(ws, rec.Key(), deployments, rec.Deployments); err != nil {
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
		a.router.PushRouter(rec)
		if err := tx.Put(store.Endpoints, rec.Key(), rec); err != nil {
			return err
		}
		undoQuota = a.holdQuota(rec.Key(), rec.Deployments)
		return nil
	}, func() {
		a.router.SyncRouter(workspace + "/" + name)
		if undoQuota != nil {
			undoQuota()
		}
	})
	if err != nil {
		return nil, err
	}
	a.log.Info("online endpoint updated", "endpoint", workspace+"/"+name)
	a.kick(workspace + "/" + name)
	return a.GetEndpoint(context.Background(), workspace, name)
}

// GetEndpoint returns an endpoint with its deployments' instances.
func (a *API) GetEndpoint(_ context.Context, workspace, name string) (*api.Endpoint, error) {
	var out *api.Endpoint
	err := a.store.View(func(tx *store.Tx) error {
		rec, err := model.GetEndpoint(tx, workspace, name)
		if err != nil {
			return err
		}
		ep := a.describeEndpoint(rec)
		out = &ep
		return nil
	})
	return out, err
}

// ListEndpoints returns a workspace's endpoints, sorted by name.
func (a *API) ListEndpoints(_ context.Context, workspace string) ([]api.Endpoint, error) {
	var out []api.Endpoint
	err := a.store.View(func(tx *store.Tx) error {
		if _, err := model.GetWorkspace(tx, workspace); err != nil {
			return err
		}
		recs, err := store.List[model.Endpoint](tx, store.Endpoints, workspace+"/")
		for _, rec := range recs {
			out = append(out, a.describeEndpoint(rec))
		}
		return err
	})
	slices.SortFunc(out, func(a, b api.Endpoint) int { return strings.Compare(a.Name, b.Name) })
	return out, err
}

// DeleteEndpoint stops taking requests for the endpoint, terminates every instance and
// deletes it. It returns once every instance is confirmed gone, or with an unavailable
// error when ctx ends first (the delete goes on, and resumes after an engine restart).
func (a *API) DeleteEndpoint(ctx context.Context, workspace, name string) error {
	key := workspace + "/" + name
	err := a.write(func(tx *store.Tx) error {
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
	a.log.Info("online endpoint deleting", "endpoint", key)
	return a.awaitDeleted(ctx, []string{key})
}

// DeleteWorkspace deletes every endpoint of a workspace that is being deleted (its
// force_destroy) and returns once their instances are all stopped.
func (a *API) DeleteWorkspace(ctx context.Context, workspace string) error {
	var keys []string
	err := a.write(func(tx *store.Tx) error {
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
	return a.awaitDeleted(ctx, keys)
}

// awaitDeleted kicks the endpoints and waits until their records are gone.
func (a *API) awaitDeleted(ctx context.Context, keys []string) error {
	objs := make([]runtime.Key, len(keys))
	for i, k := range keys {
		objs[i] = runtime.EndpointKey(k)
	}
	if k, ok := a.loop.AwaitDeleted(ctx, objs); !ok {
		return api.Errorf(api.CodeUnavailable, "", "online endpoint %s is still stopping its instances; the delete goes on in the background, try again to wait for it", k.Name)
	}
	return nil
}

// GetEndpointKeys returns an endpoint's keys.
func (a *API) GetEndpointKeys(_ context.Context, workspace, name string) (*api.EndpointKeys, error) {
	var keys api.EndpointKeys
	err := a.store.View(func(tx *store.Tx) error {
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
func (a *API) RegenerateEndpointKeys(_ context.Context, workspace, name, keyType string) (*api.EndpointKeys, error) {
	if err := validation.KeyType(keyType); err != nil {
		return nil, err
	}
	var keys api.EndpointKeys
	err := a.write(func(tx *store.Tx) error {
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
			a.router.PushRouter(rec)
		}
		return tx.Put(store.Endpoints, rec.Key(), rec)
	}, func() { a.router.SyncRouter(workspace + "/" + name) })
	if err != nil {
		return nil, err
	}
	a.log.Info("online endpoint key regenerated", "endpoint", workspace+"/"+name, "key_type", keyType)
	a.kick(workspace + "/" + name)
	return &keys, nil
}

// GetEndpointToken issues an AML token for an aml_token endpoint.
func (a *API) GetEndpointToken(_ context.Context, workspace, name string) (*api.EndpointToken, error) {
	var rec model.Endpoint
	err := a.store.View(func(tx *store.Tx) error {
		var err error
		rec, err = model.GetEndpoint(tx, workspace, name)
		return err
	})
	if err != nil {
		return nil, err
	}
	if rec.AuthMode != api.AuthModeAMLToken {
		return nil, api.Errorf(api.CodeInvalid, "auth_mode", "online endpoint %q uses auth_mode %q: read its keys instead, or set auth_mode = %q to use tokens", name, rec.AuthMode, api.AuthModeAMLToken)
	}
	token, expires, err := a.scoring.IssueToken(rec.Key())
	if err != nil {
		return nil, err
	}
	return &api.EndpointToken{AccessToken: token, ExpiresOn: expires}, nil
}
