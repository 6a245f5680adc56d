package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
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
