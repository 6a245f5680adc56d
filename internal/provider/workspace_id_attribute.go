package provider

import (
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/provider/validators"
)

// workspaceIDAttribute is the `workspace_id` of a resource that lives in a workspace
// (clusters, instances, attached computes, endpoints): required, checked at plan time to be
// a workspace ID with a valid name, and changing it replaces the resource. what names the
// resource in the description ("cluster").
func workspaceIDAttribute(what string) schema.StringAttribute {
	return schema.StringAttribute{
		MarkdownDescription: "The ID of the workspace the " + what + " belongs to, `/workspaces/{name}`, usually " +
			"`mlcompute_workspace.<name>.id`. Changing it replaces the " + what + ".",
		Required:      true,
		PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
		Validators: []validator.String{
			validators.StringFunc("Invalid Workspace ID", "the value must be a workspace ID, /workspaces/{name}", checkWorkspaceID),
		},
	}
}

// checkWorkspaceID checks that a workspace_id is a workspace's ID (api.ParseID) whose name
// follows the engine's workspace naming rule.
func checkWorkspaceID(s string) error {
	id, err := api.ParseID(s, "")
	if err != nil {
		return err
	}
	return validation.WorkspaceName.Check("workspace_id", id.Workspace)
}
