package workspaces_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes/computestest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/workspaces"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// setup builds the controller as the engine does, its writes in turn with the computes'; the
// force deletes of computes and endpoints are recorded and then delete the records.
func setup(t *testing.T) (*computestest.Env, *workspaces.Controller, *[]string) {
	t.Helper()
	env := computestest.New(t, computestest.Options{})
	var deleted []string
	deleteAll := func(b store.Bucket) func(context.Context, string) error {
		return func(_ context.Context, ws string) error {
			deleted = append(deleted, string(b)+":"+ws)
			return env.Store.Update(func(tx *store.Tx) error {
				for _, k := range tx.Keys(b, ws+"/") {
					if err := tx.Delete(b, k); err != nil {
						return err
					}
				}
				return nil
			})
		}
	}
	c := workspaces.New(workspaces.Config{
		Store: env.Store, Clock: env.Clock, Logger: hclog.NewNullLogger(), Write: env.Core.Write,
		Locations: []string{"local", "westeurope"}, DeleteComputes: deleteAll(store.Computes), DeleteEndpoints: deleteAll(store.Endpoints),
	})
	return env, c, &deleted
}

func TestCreateIsIdempotentAndRefusesATakenName(t *testing.T) {
	_, c, _ := setup(t)
	ctx := context.Background()
	first, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}, "key-1")
	if err != nil || first.Location != api.DefaultLocation || first.ID != api.WorkspaceID("lab") {
		t.Fatalf("CreateWorkspace = %+v, %v; want lab at the default location", first, err)
	}
	again, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}, "key-1")
	if err != nil || again.CreatedOn != first.CreatedOn {
		t.Fatalf("a retry = %+v, %v; want the first result", again, err)
	}
	_, err = c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}, "")
	if e := computestest.WantError(t, err, api.CodeConflict, "name"); !strings.Contains(e.Message, "terraform import") {
		t.Fatalf("conflict %q does not say how to import", e.Message)
	}
	_, err = c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "far", Location: "mars"}, "")
	_ = computestest.WantError(t, err, api.CodeInvalid, "location")
	list, err := c.ListWorkspaces(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("ListWorkspaces = %+v, %v; want lab alone", list, err)
	}
}

func TestUpdateReplacesQuotasAndChecksThem(t *testing.T) {
	_, c, _ := setup(t)
	ctx := context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}, ""); err != nil {
		t.Fatal(err)
	}
	got, err := c.UpdateWorkspace(ctx, "lab", api.WorkspaceUpdate{Description: "d", Quotas: map[string]int64{"standardDSv2Family": 8}})
	if err != nil || got.Quotas["standardDSv2Family"] != 8 || got.Description != "d" {
		t.Fatalf("UpdateWorkspace = %+v, %v", got, err)
	}
	_, err = c.UpdateWorkspace(ctx, "lab", api.WorkspaceUpdate{Quotas: map[string]int64{"noSuchFamily": 8}})
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.CodeInvalid {
		t.Fatalf("a quota of an unknown family = %v; want invalid", err)
	}
	_, err = c.UpdateWorkspace(ctx, "gone", api.WorkspaceUpdate{})
	_ = computestest.WantError(t, err, api.CodeNotFound, "")
}

func TestDeleteRefusesWhileItHoldsThingsUnlessForced(t *testing.T) {
	env, c, deleted := setup(t)
	ctx := context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}, ""); err != nil {
		t.Fatal(err)
	}
	rec := model.Compute{Workspace: "lab", Name: "cpu", Type: api.TypeComputeCluster}
	if err := env.Store.Update(func(tx *store.Tx) error { return tx.Put(store.Computes, rec.Key(), rec) }); err != nil {
		t.Fatal(err)
	}
	err := c.DeleteWorkspace(ctx, "lab", false)
	if e := computestest.WantError(t, err, api.CodeConflict, "force_destroy"); !strings.Contains(e.Message, api.ComputeID("lab", "cpu")) {
		t.Fatalf("refusal %q does not name the compute", e.Message)
	}
	if err := c.DeleteWorkspace(ctx, "lab", true); err != nil {
		t.Fatal(err)
	}
	if want := "computes:lab endpoints:lab"; strings.Join(*deleted, " ") != want {
		t.Fatalf("force deleted %v; want %s", *deleted, want)
	}
	_, err = c.GetWorkspace(ctx, "lab")
	_ = computestest.WantError(t, err, api.CodeNotFound, "")
	_ = computestest.WantError(t, c.DeleteWorkspace(ctx, "lab", false), api.CodeNotFound, "")
}
