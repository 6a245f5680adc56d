package provider

import (
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
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
