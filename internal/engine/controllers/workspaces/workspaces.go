// Package workspaces is the workspaces' controller: create, read, update (description,
// tags, quotas) and delete, which, with force, first deletes the workspace's computes and
// online endpoints through the functions the engine gives it (their controllers own those
// records).
package workspaces

import (
	"context"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// Config is what the workspaces controller is built from.
type Config struct {
	Store  *store.Store
	Clock  clock.PassiveClock
	Logger hclog.Logger
	// Write runs a write transaction in turn with the computes' writers (computes.Core's
	// Write): a workspace's quotas and existence are read by compute creates in turn.
	Write func(f func(tx *store.Tx) error) error
	// Locations are the locations this engine serves.
	Locations []string
	// DeleteComputes and DeleteEndpoints delete every compute or endpoint of a workspace
	// (a force delete) and return once they are gone.
	DeleteComputes, DeleteEndpoints func(ctx context.Context, workspace string) error
}

// Controller manages workspaces.
type Controller struct {
	store                           *store.Store
	clock                           clock.PassiveClock
	log                             hclog.Logger
	write                           func(f func(tx *store.Tx) error) error
	locations                       []string
	deleteComputes, deleteEndpoints func(ctx context.Context, workspace string) error
}

// New builds the controller.
func New(cfg Config) *Controller {
	return &Controller{
		store: cfg.Store, clock: cfg.Clock, log: cfg.Logger.Named("workspaces"), write: cfg.Write,
		locations: cfg.Locations, deleteComputes: cfg.DeleteComputes, deleteEndpoints: cfg.DeleteEndpoints,
	}
}

// CreateWorkspace creates a workspace. A retry with the same idempotency key returns the
// workspace the first attempt created; any other create of a taken name is a conflict.
func (c *Controller) CreateWorkspace(_ context.Context, spec api.WorkspaceSpec, idempotencyKey string) (*api.Workspace, error) {
	if spec.Location == "" {
		spec.Location = api.DefaultLocation
	}
	if err := validation.Workspace(spec, c.locations); err != nil {
		return nil, err
	}

	var out api.Workspace
	err := c.write(func(tx *store.Tx) error {
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
			CreatedOn:   c.clock.Now().UTC(),
		}
		if err := tx.Put(store.Workspaces, spec.Name, out); err != nil {
			return err
		}
		return model.Remember(tx, idempotencyKey, out.ID, c.clock.Now())
	})
	if err != nil {
		return nil, err
	}
	c.log.Info("workspace created", "workspace", out.Name, "location", out.Location)
	return &out, nil
}

// GetWorkspace returns a workspace or a not_found error.
func (c *Controller) GetWorkspace(_ context.Context, name string) (*api.Workspace, error) {
	var ws api.Workspace
	err := c.store.View(func(tx *store.Tx) error {
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
func (c *Controller) ListWorkspaces(_ context.Context) ([]api.Workspace, error) {
	var out []api.Workspace
	err := c.store.View(func(tx *store.Tx) error {
		var err error
		out, err = store.List[api.Workspace](tx, store.Workspaces, "")
		return err
	})
	return out, err
}

// UpdateWorkspace replaces a workspace's description, tags and quotas.
func (c *Controller) UpdateWorkspace(_ context.Context, name string, upd api.WorkspaceUpdate) (*api.Workspace, error) {
	if err := validation.Quotas(upd.Quotas); err != nil {
		return nil, err
	}
	var ws api.Workspace
	err := c.write(func(tx *store.Tx) error {
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
	c.log.Info("workspace updated", "workspace", name)
	return &ws, nil
}

// DeleteWorkspace deletes a workspace. Without force it refuses while the workspace still
// holds computes or endpoints, and lists them; with force it deletes them first (releasing
// every node) and then the workspace. Deleting a missing workspace is not_found.
func (c *Controller) DeleteWorkspace(ctx context.Context, name string, force bool) error {
	err := c.store.View(func(tx *store.Tx) error {
		if _, err := model.GetWorkspace(tx, name); err != nil {
			return err
		}
		if held := heldBy(tx, name); len(held) > 0 && !force {
			return api.Errorf(api.CodeConflict, "force_destroy",
				"workspace %q still holds %s; delete them first, or set force_destroy = true to delete them with the workspace",
				name, strings.Join(held, ", "))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if force {
		if err := c.deleteComputes(ctx, name); err != nil {
			return err
		}
		if err := c.deleteEndpoints(ctx, name); err != nil {
			return err
		}
	}
	err = c.write(func(tx *store.Tx) error {
		if keys := tx.Keys(store.Computes, name+"/"); len(keys) > 0 {
			return api.Errorf(api.CodeConflict, "", "workspace %q gained computes while it was being deleted: %s", name, strings.Join(keys, ", "))
		}
		if keys := tx.Keys(store.Endpoints, name+"/"); len(keys) > 0 {
			return api.Errorf(api.CodeConflict, "", "workspace %q gained online endpoints while it was being deleted: %s", name, strings.Join(keys, ", "))
		}
		// Environments and schedules are definitions only (jobs keep their own copy), so
		// they go with their workspace.
		for _, b := range []store.Bucket{store.Environments, store.Schedules} {
			for _, key := range tx.Keys(b, name+"/") {
				if err := tx.Delete(b, key); err != nil {
					return err
				}
			}
		}
		return tx.Delete(store.Workspaces, name)
	})
	if err != nil {
		return err
	}
	c.log.Info("workspace deleted", "workspace", name, "force", force)
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
