package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store/storetest"
)

func newTestEngine(t *testing.T, locations ...string) (*Engine, *store.Store, *clocktesting.FakeClock) {
	t.Helper()
	st := storetest.Open(t, t.TempDir())
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	e, err := New(Config{Store: st, Clock: clk, Locations: locations})
	if err != nil {
		t.Fatal(err)
	}
	return e, st, clk
}

func TestCreateWorkspaceDefaultsAndStamps(t *testing.T) {
	e, _, clk := newTestEngine(t)
	ws, err := e.CreateWorkspace(context.Background(), api.WorkspaceSpec{Name: "team-a", Tags: map[string]string{"k": "v"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if ws.ID != "/workspaces/team-a" || ws.Location != "local" || !ws.CreatedOn.Equal(clk.Now()) {
		t.Fatalf("created %+v; want id /workspaces/team-a, location local, created_on %v", ws, clk.Now())
	}
	got, err := e.GetWorkspace(context.Background(), "team-a")
	if err != nil || got.Tags["k"] != "v" {
		t.Fatalf("GetWorkspace = %+v, %v", got, err)
	}
}

func TestCreateWorkspaceRejectsBadInput(t *testing.T) {
	e, _, _ := newTestEngine(t, "local", "lab")
	for _, tc := range []struct {
		name  string
		spec  api.WorkspaceSpec
		field string
		want  string
	}{
		{"short name", api.WorkspaceSpec{Name: "ab"}, "name", "3 to 33 characters"},
		{"bad char", api.WorkspaceSpec{Name: "team.a"}, "name", "invalid workspace name"},
		{"unknown location", api.WorkspaceSpec{Name: "team-a", Location: "mars"}, "location", "allowed locations: local, lab"},
		{"negative quota", api.WorkspaceSpec{Name: "team-a", Quotas: map[string]int64{"standardDSv2Family": -1}}, "quotas.standardDSv2Family", "0 or more"},
		{"unknown family", api.WorkspaceSpec{Name: "team-a", Quotas: map[string]int64{"standardXYZFamily": 4}}, "quotas.standardXYZFamily", "unknown VM family"},
		{"wrong case family", api.WorkspaceSpec{Name: "team-a", Quotas: map[string]int64{"standarddsv2family": 4}}, "quotas.standarddsv2family", `must be spelled "standardDSv2Family"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.CreateWorkspace(context.Background(), tc.spec, "")
			if !api.IsInvalid(err) || api.FieldOf(err) != tc.field || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v (code %q, field %q); want invalid on %s containing %q", err, api.CodeOf(err), api.FieldOf(err), tc.field, tc.want)
			}
		})
	}
}

func TestCreateWorkspaceIdempotencyAndConflict(t *testing.T) {
	e, _, clk := newTestEngine(t)
	ctx := context.Background()
	first, err := e.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "team-a"}, "key-1")
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	// The retry of the same call returns what the first attempt made, not a second workspace.
	again, err := e.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "team-a"}, "key-1")
	if err != nil || !again.CreatedOn.Equal(first.CreatedOn) {
		t.Fatalf("retry = %+v, %v; want the first workspace back", again, err)
	}
	// A different call for a taken name is a conflict that tells how to import.
	_, err = e.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "team-a"}, "key-2")
	if !api.IsConflict(err) || !strings.Contains(err.Error(), "terraform import") {
		t.Fatalf("second create = %v; want conflict mentioning terraform import", err)
	}
	// A key reused for another name is a conflict too.
	_, err = e.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "team-b"}, "key-1")
	if !api.IsConflict(err) {
		t.Fatalf("key reuse = %v; want conflict", err)
	}
	list, _ := e.ListWorkspaces(ctx)
	if len(list) != 1 {
		t.Fatalf("workspaces = %d; want 1", len(list))
	}
}

func TestUpdateWorkspaceReplacesMutableFields(t *testing.T) {
	e, _, _ := newTestEngine(t)
	ctx := context.Background()
	if _, err := e.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "team-a", Description: "old", Tags: map[string]string{"a": "1"}}, ""); err != nil {
		t.Fatal(err)
	}
	ws, err := e.UpdateWorkspace(ctx, "team-a", api.WorkspaceUpdate{Description: "new", Quotas: map[string]int64{"standardNCSv3Family": 48}})
	if err != nil {
		t.Fatal(err)
	}
	if ws.Description != "new" || ws.Tags != nil || ws.Quotas["standardNCSv3Family"] != 48 || ws.Location != "local" {
		t.Fatalf("updated = %+v", ws)
	}
	if _, err := e.UpdateWorkspace(ctx, "team-a", api.WorkspaceUpdate{Quotas: map[string]int64{"standardNCSv3Family": -4}}); !api.IsInvalid(err) {
		t.Fatalf("negative quota update = %v; want invalid", err)
	}
	if _, err := e.UpdateWorkspace(ctx, "nope", api.WorkspaceUpdate{}); !api.IsNotFound(err) {
		t.Fatalf("update of missing = %v; want not_found", err)
	}
}

func TestDeleteWorkspace(t *testing.T) {
	e, _, _ := newTestEngine(t)
	ctx := context.Background()
	if _, err := e.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "team-a"}, ""); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteWorkspace(ctx, "team-a", false); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteWorkspace(ctx, "team-a", false); !api.IsNotFound(err) {
		t.Fatalf("second delete = %v; want not_found", err)
	}
}

func TestEffectiveQuota(t *testing.T) {
	ws := &api.Workspace{Quotas: map[string]int64{"standardNCSv3Family": 48}}
	if got := model.EffectiveQuota(ws, "standardNCSv3Family"); got != 48 {
		t.Errorf("override = %d; want 48", got)
	}
	for _, f := range catalog.Families() {
		if f.Name == "standardNCSv3Family" {
			continue
		}
		if got := model.EffectiveQuota(ws, f.Name); got != f.DefaultQuota {
			t.Errorf("%s = %d; want catalog default %d", f.Name, got, f.DefaultQuota)
		}
		if f.RequiresApproval && model.EffectiveQuota(ws, f.Name) != 0 {
			t.Errorf("%s requires approval but has quota %d", f.Name, model.EffectiveQuota(ws, f.Name))
		}
	}
}
