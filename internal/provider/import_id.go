package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// workspaceObject says how the import of an object that lives in a workspace
// (/workspaces/{workspace}/{collection}/{name}) names it in its errors.
type workspaceObject struct {
	collection string // api.CollectionComputes
	title      string // "Compute Cluster", in the error's summary
	noun       string // "a compute", in "is not a compute ID"
	example    string // "mlcompute_compute_cluster.example"
	name       string // a name for the example ID
}

// importWorkspaceObject takes the ID of an object in a workspace into state (id, name and
// workspace_id); Read fills in everything else from the engine. A malformed ID is an error
// that shows the form and an example.
func importWorkspaceObject(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse, o workspaceObject) {
	id, err := api.ParseID(req.ID, o.collection)
	if err != nil {
		resp.Diagnostics.AddError("Invalid "+o.title+" ID",
			fmt.Sprintf("The import ID %q is not %s ID.\n\nUse /workspaces/{workspace}/%s/{name}, for "+
				"example: terraform import %s /workspaces/team-a/%s/%s\n\n"+
				"Original error: %s", req.ID, o.noun, o.collection, o.example, o.collection, o.name, err))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), id.String())...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), id.Name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("workspace_id"), api.WorkspaceID(id.Workspace))...)
}
