package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
)

// stateComputeID parses the compute ID held in state, adding an error when it is not one
// (a state edited by hand). Every kind of compute (cluster, instance, attached) has an ID of
// this form, /workspaces/{workspace}/computes/{name}.
func stateComputeID(v types.String, diags *diag.Diagnostics) (api.ID, bool) {
	id, err := api.ParseID(v.ValueString(), api.CollectionComputes)
	if err != nil {
		diags.AddAttributeError(path.Root("id"), "Invalid Compute ID",
			fmt.Sprintf("The state holds an ID that is not a compute ID.\n\nRemove the resource from state with "+
				"'terraform state rm' and import it by /workspaces/{workspace}/computes/{name}.\n\nOriginal error: %s", err))
		return api.ID{}, false
	}
	return id, true
}

// trackPossiblyCreated records the ID of a compute whose create failed in a way that may
// have gone through (the engine's answer was lost or the timeout struck after it acted).
// Terraform then tracks the compute as tainted: the next plan reads it back and replaces it
// if it exists, instead of leaving it untracked.
func trackPossiblyCreated(ctx context.Context, state *tfsdk.State, diags *diag.Diagnostics, workspace, name string, workspaceID types.String, timeouts attr.Value) {
	diags.Append(state.SetAttribute(ctx, path.Root("id"), api.ComputeID(workspace, name))...)
	diags.Append(state.SetAttribute(ctx, path.Root("name"), name)...)
	diags.Append(state.SetAttribute(ctx, path.Root("workspace_id"), workspaceID)...)
	diags.Append(state.SetAttribute(ctx, path.Root("timeouts"), timeouts)...)
}

// computeKind names a kind of compute in messages and examples.
type computeKind struct {
	noun         string // "compute cluster"
	title        string // "Compute Cluster"
	resourceType string // "mlcompute_compute_cluster"
	exampleName  string // a compute name for the import example
}

var (
	clusterKind  = computeKind{"compute cluster", "Compute Cluster", "mlcompute_compute_cluster", "cpu"}
	instanceKind = computeKind{"compute instance", "Compute Instance", "mlcompute_compute_instance", "alice"}
)

// deleteCompute deletes a compute within timeout. The engine cancels its jobs and returns
// once every node is released; a compute already gone counts as deleted.
func deleteCompute(ctx context.Context, c *client.Client, diags *diag.Diagnostics, schemaType attr.Type, kind computeKind, id api.ID, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	action := fmt.Sprintf("delete %s %q in workspace %q", kind.noun, id.Name, id.Workspace)
	err := c.DeleteCompute(ctx, id.Workspace, id.Name)
	if api.IsNotFound(err) {
		tflog.Debug(ctx, kind.noun+" already gone", map[string]any{"compute": id.String()})
		return
	}
	if err != nil {
		if !addTimeoutError(ctx, diags, kind.title+" Delete Timed Out", "delete", action, timeout, err) {
			addEngineError(diags, schemaType, "Cannot Delete "+kind.title, action, err)
		}
		return
	}
	tflog.Info(ctx, "deleted "+kind.noun, map[string]any{"compute": id.String()})
}

// updateCompute sends upd to the engine, which replaces every mutable field at once. ctx
// carries the update's deadline; timeout only words the message. On failure it adds the
// error, with an instance's engine field made relative to the schema, and returns nil.
func updateCompute(ctx context.Context, c *client.Client, diags *diag.Diagnostics, schemaType attr.Type, kind computeKind, id api.ID, upd api.ComputeUpdate, timeout time.Duration) *api.Compute {
	action := fmt.Sprintf("update %s %q in workspace %q", kind.noun, id.Name, id.Workspace)
	updated, err := c.UpdateCompute(ctx, id.Workspace, id.Name, upd)
	if err != nil {
		if !addTimeoutError(ctx, diags, kind.title+" Update Timed Out", "update", action, timeout, err) {
			addEngineError(diags, schemaType, "Cannot Update "+kind.title, action, instanceFieldError(err))
		}
		return nil
	}
	tflog.Info(ctx, "updated "+kind.noun, map[string]any{"compute": updated.ID})
	return updated
}

// importComputeID takes a compute ID, /workspaces/{workspace}/computes/{name}, into state;
// Read fills in everything else from the engine.
func importComputeID(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse, kind computeKind) {
	importWorkspaceObject(ctx, req, resp, workspaceObject{
		collection: api.CollectionComputes, title: kind.title, noun: "a compute",
		example: kind.resourceType + ".example", name: kind.exampleName,
	})
}
