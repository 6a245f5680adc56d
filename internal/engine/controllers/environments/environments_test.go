package environments_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/environments"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store/storetest"
)

// setup builds the controller on a real store and a fake clock, with a workspace "lab". Its
// cache directory is empty, so nothing is collected; changes of a content hash are recorded.
func setup(t *testing.T) (*environments.Controller, *clocktesting.FakeClock, *[]string) {
	t.Helper()
	st := storetest.Open(t, t.TempDir())
	storetest.PutWorkspace(t, st, "lab", nil, time.Time{})
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	var changed []string
	c := environments.New(environments.Config{Store: st, Clock: clk, Logger: hclog.NewNullLogger(),
		OnChange: func(ws, name string) { changed = append(changed, ws+"/"+name) }})
	return c, clk, &changed
}

// wantError checks an error's code, and its field unless it is not_found.
func wantError(t *testing.T, err error, code api.ErrorCode, field string) {
	t.Helper()
	var e *api.Error
	if !errors.As(err, &e) || e.Code != code || (code != api.CodeNotFound && e.Field != field) {
		t.Fatalf("error = %v; want %s on %q", err, code, field)
	}
}

func TestCreateHashesTheDefinitionAndFillsTheInterpreter(t *testing.T) {
	c, _, _ := setup(t)
	ctx := context.Background()
	spec := api.EnvironmentSpec{Name: "torch", Python: &api.PythonEnvironment{Requirements: []string{"numpy==2.0.0"}}}
	got, err := c.Create(ctx, "lab", spec, "key-1")
	if err != nil || got.ContentHash == "" || got.Python.Python != api.DefaultPython {
		t.Fatalf("Create = %+v, %v; want a content hash and the default interpreter", got, err)
	}
	again, err := c.Create(ctx, "lab", spec, "key-1")
	if err != nil || again.ContentHash != got.ContentHash {
		t.Fatalf("a retry = %+v, %v; want the first result", again, err)
	}
	_, err = c.Create(ctx, "lab", spec, "")
	wantError(t, err, api.CodeConflict, "name")
	_, err = c.Create(ctx, "lab", api.EnvironmentSpec{Name: "none"}, "")
	wantError(t, err, api.CodeInvalid, "python")
	_, err = c.Create(ctx, "lab", api.EnvironmentSpec{Name: "both", Python: &api.PythonEnvironment{},
		UserManaged: &api.UserManagedEnvironment{InterpreterPath: "/usr/bin/python3"}}, "")
	wantError(t, err, api.CodeInvalid, "user_managed")
	_, err = c.Create(ctx, "nowhere", spec, "")
	wantError(t, err, api.CodeNotFound, "")
}

func TestUpdateChangesTheHashOnlyWhenTheDefinitionChanges(t *testing.T) {
	c, clk, changed := setup(t)
	ctx := context.Background()
	created, err := c.Create(ctx, "lab", api.EnvironmentSpec{Name: "torch", Python: &api.PythonEnvironment{Requirements: []string{"numpy==2.0.0"}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Hour)
	same, err := c.Update(ctx, "lab", "torch", api.EnvironmentUpdate{Python: &api.PythonEnvironment{Requirements: []string{"numpy==2.0.0"}, Python: api.DefaultPython}})
	if err != nil || same.ContentHash != created.ContentHash || len(*changed) != 0 {
		t.Fatalf("an update to the same definition = %+v, %v, changes %v; want the same hash and no change", same, err, *changed)
	}
	next, err := c.Update(ctx, "lab", "torch", api.EnvironmentUpdate{Python: &api.PythonEnvironment{Requirements: []string{"numpy==2.1.0"}}})
	if err != nil || next.ContentHash == created.ContentHash {
		t.Fatalf("a new requirement = %+v, %v; want a new hash", next, err)
	}
	if len(*changed) != 1 || (*changed)[0] != "lab/torch" {
		t.Fatalf("changes = %v; want lab/torch once", *changed)
	}
	if list, err := c.List(ctx, "lab"); err != nil || len(list) != 1 || list[0].ContentHash != next.ContentHash {
		t.Fatalf("List = %+v, %v", list, err)
	}
}

func TestDeleteRemovesTheRecord(t *testing.T) {
	c, _, _ := setup(t)
	ctx := context.Background()
	if _, err := c.Create(ctx, "lab", api.EnvironmentSpec{Name: "own", UserManaged: &api.UserManagedEnvironment{InterpreterPath: "/usr/bin/python3"}}, ""); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "lab", "own"); err != nil {
		t.Fatal(err)
	}
	_, err := c.Get(ctx, "lab", "own")
	wantError(t, err, api.CodeNotFound, "")
	wantError(t, c.Delete(ctx, "lab", "own"), api.CodeNotFound, "")
}
