package engine

import (
	"context"
	"slices"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// CreateWorkspace creates a workspace. A retry with the same idempotency key returns the
// workspace the first attempt created; any other create of a taken name is a conflict.
func (e *Engine) CreateWorkspace(_ context.Context, spec api.WorkspaceSpec, idempotencyKey string) (*api.Workspace, error) {
	if spec.Location == "" {
		spec.Location = DefaultLocation
	}
	if err := validation.Workspace(spec, e.locations); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()

	var out api.Workspace
	err := e.store.Update(func(tx *store.Tx) error {
		if done, err := model.Replayed(tx, idempotencyKey, api.WorkspaceID(spec.Name)); done || err != nil {
			if done {
				_, err = tx.Get(store.Workspaces, spec.Name, &out)
			}
			return err
		}
		if ok, err := tx.Get(store.Workspaces, spec.Name, &api.Workspace{}); err != nil {
			return err
		} else if ok {
			return api.Errorf(api.CodeConflict, "name",
				"workspace %q already exists; to manage it with Terraform, import it: terraform import mlcompute_workspace.<name> %s",
				spec.Name, api.WorkspaceID(spec.Name))
		}
		out = api.Workspace{
			ID:          api.WorkspaceID(spec.Name),
			Name:        spec.Name,
			Location:    spec.Location,
			Description: spec.Description,
			Tags:        spec.Tags,
			Quotas:      spec.Quotas,
			CreatedOn:   e.clock.Now().UTC(),
		}
		if err := tx.Put(store.Workspaces, spec.Name, out); err != nil {
			return err
		}
		return model.Remember(tx, idempotencyKey, out.ID)
	})
	if err != nil {
		return nil, err
	}
	e.log.Info("workspace created", "workspace", out.Name, "location", out.Location)
	return &out, nil
}

// GetWorkspace returns a workspace or a not_found error.
func (e *Engine) GetWorkspace(_ context.Context, name string) (*api.Workspace, error) {
	var ws api.Workspace
	err := e.store.View(func(tx *store.Tx) error {
		ok, err := tx.Get(store.Workspaces, name, &ws)
		if err == nil && !ok {
			return model.NotFoundWorkspace(name)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &ws, nil
}

// ListWorkspaces returns every workspace, sorted by name.
func (e *Engine) ListWorkspaces(_ context.Context) ([]api.Workspace, error) {
	var out []api.Workspace
	err := e.store.View(func(tx *store.Tx) error {
		var err error
		out, err = store.List[api.Workspace](tx, store.Workspaces, "")
		return err
	})
	return out, err
}

// UpdateWorkspace replaces a workspace's description, tags and quotas.
func (e *Engine) UpdateWorkspace(_ context.Context, name string, upd api.WorkspaceUpdate) (*api.Workspace, error) {
	if err := validation.Quotas(upd.Quotas); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var ws api.Workspace
	err := e.store.Update(func(tx *store.Tx) error {
		ok, err := tx.Get(store.Workspaces, name, &ws)
		if err != nil {
			return err
		}
		if !ok {
			return model.NotFoundWorkspace(name)
		}
		ws.Description, ws.Tags, ws.Quotas = upd.Description, upd.Tags, upd.Quotas
		return tx.Put(store.Workspaces, name, ws)
	})
	if err != nil {
		return nil, err
	}
	e.log.Info("workspace updated", "workspace", name)
	return &ws, nil
}

// DeleteWorkspace deletes a workspace. Without force it refuses while the workspace still
// holds computes or endpoints, and lists them; with force it deletes them first (releasing
// every node) and then the workspace. Deleting a missing workspace is not_found.
func (e *Engine) DeleteWorkspace(ctx context.Context, name string, force bool) error {
	var computes []string
	e.mu.Lock()
	err := e.store.Update(func(tx *store.Tx) error {
		if _, err := model.GetWorkspace(tx, name); err != nil {
			return err
		}
		held := heldBy(tx, name)
		if len(held) > 0 && !force {
			return api.Errorf(api.CodeConflict, "force_destroy",
				"workspace %q still holds %s; delete them first, or set force_destroy = true to delete them with the workspace",
				name, strings.Join(held, ", "))
		}
		recs, err := store.List[model.Compute](tx, store.Computes, name+"/")
		for _, rec := range recs {
			computes = append(computes, rec.Key())
			if !rec.Deleting {
				rec.Deleting = true
				if err := tx.Put(store.Computes, rec.Key(), rec); err != nil {
					return err
				}
			}
		}
		return err
	})
	e.mu.Unlock()
	if err != nil {
		return err
	}
	if err := e.waitDeleted(ctx, computes); err != nil {
		return err
	}
	if err := e.endpoints.DeleteWorkspace(ctx, name); err != nil {
		return err
	}
	e.mu.Lock()
	err = e.store.Update(func(tx *store.Tx) error {
		if keys := tx.Keys(store.Computes, name+"/"); len(keys) > 0 {
			return api.Errorf(api.CodeConflict, "", "workspace %q gained computes while it was being deleted: %s", name, strings.Join(keys, ", "))
		}
		if keys := tx.Keys(store.Endpoints, name+"/"); len(keys) > 0 {
			return api.Errorf(api.CodeConflict, "", "workspace %q gained online endpoints while it was being deleted: %s", name, strings.Join(keys, ", "))
		}
		return tx.Delete(store.Workspaces, name)
	})
	e.mu.Unlock()
	if err != nil {
		return err
	}
	e.log.Info("workspace deleted", "workspace", name, "force", force)
	return nil
}

// heldBy lists the IDs of the computes and endpoints in a workspace.
func heldBy(tx *store.Tx, workspace string) []string {
	var ids []string
	for b, collection := range map[store.Bucket]string{store.Computes: api.CollectionComputes, store.Endpoints: api.CollectionOnlineEndpoints} {
		for _, key := range tx.Keys(b, workspace+"/") {
			ids = append(ids, api.ID{Workspace: workspace, Collection: collection, Name: strings.TrimPrefix(key, workspace+"/")}.String())
		}
	}
	slices.Sort(ids)
	return ids
}

// EffectiveQuota is a family's vCPU limit in a workspace: the workspace's own quota when it
// sets one, else the catalog default (0 for families that require approval).
func EffectiveQuota(ws *api.Workspace, family string) int64 {
	if q, ok := ws.Quotas[family]; ok {
		return q
	}
	if f, ok := catalog.LookupFamily(family); ok {
		return f.DefaultQuota
	}
	return 0
}
