package attached_test

import (
	"context"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes/computestest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/attached"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// These tests never reach a machine: what they check is refused, or accepted, before any
// connection. Attaching real machines is tested in package engine against real sshd hosts.

func setup(t *testing.T) (*computestest.Env, *attached.Controller) {
	t.Helper()
	env := computestest.New(t, computestest.Options{})
	env.Workspace("lab", nil)
	rec := model.Compute{Workspace: "lab", Name: "box", Type: api.TypeAttached, CreatedOn: computestest.Start,
		Attached:      &model.Attached{Address: "10.0.0.5", Port: 22, Username: "ml", Password: "secret", HostKeyFingerprint: "SHA256:abc", VCPUs: 8, MemoryGB: 32},
		ScaleSettings: &api.ScaleSettings{MinNodeCount: 1, MaxNodeCount: 1, ScaleDownNodesAfterIdleDuration: "PT0S"}}
	if err := env.Store.Update(func(tx *store.Tx) error { return tx.Put(store.Computes, rec.Key(), rec) }); err != nil {
		t.Fatal(err)
	}
	return env, attached.New(env.Core, attached.Config{})
}

func TestCreateRefusesASpecWithoutAMachineOrATakenName(t *testing.T) {
	_, c := setup(t)
	ctx := context.Background()
	_, err := c.Create(ctx, "lab", api.ComputeSpec{Name: "other", Type: api.TypeAttached}, "")
	_ = computestest.WantError(t, err, api.CodeInvalid, "virtual_machine")
	vm := &api.VirtualMachine{Address: "10.0.0.6", Username: "ml", Password: "pw"}
	_, err = c.Create(ctx, "lab", api.ComputeSpec{Name: "box", Type: api.TypeAttached, VirtualMachine: vm}, "")
	_ = computestest.WantError(t, err, api.CodeConflict, "name")
}

func TestUpdateKeepsTheMachineAndChangesTheDescription(t *testing.T) {
	env, c := setup(t)
	ctx := context.Background()
	_, err := c.Update(ctx, "lab", "box", api.ComputeUpdate{ScaleSettings: &api.ScaleSettings{MaxNodeCount: 2}})
	_ = computestest.WantError(t, err, api.CodeInvalid, "scale_settings")
	_, err = c.Update(ctx, "lab", "box", api.ComputeUpdate{VMSize: "Standard_DS3_v2"})
	_ = computestest.WantError(t, err, api.CodeInvalid, "vm_size")
	_, err = c.Update(ctx, "lab", "box", api.ComputeUpdate{VirtualMachine: &api.VirtualMachine{Address: "10.0.0.9", Username: "ml", Password: "secret"}})
	_ = computestest.WantError(t, err, api.CodeInvalid, "virtual_machine.address")
	got, err := c.Update(ctx, "lab", "box", api.ComputeUpdate{Description: "the lab's box",
		VirtualMachine: &api.VirtualMachine{Address: "10.0.0.5", Username: "ml", Password: "secret"}})
	if err != nil || got.Description != "the lab's box" {
		t.Fatalf("Update = %+v, %v; want the description changed", got, err)
	}
	rec := env.Compute("lab/box")
	if rec.Attached.Password != "secret" || rec.Attached.HostKeyFingerprint != "SHA256:abc" || rec.Attached.VCPUs != 8 {
		t.Fatalf("stored machine = %+v; want it as attached", rec.Attached)
	}
	if got.VirtualMachine == nil || got.VirtualMachine.Password != "" {
		t.Fatalf("the returned machine = %+v; want it without its password", got.VirtualMachine)
	}
}
