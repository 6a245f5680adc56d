package provider

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
)

// This file turns engine errors into diagnostics, for every resource and data source: a
// short Title Case summary chosen by the caller, a detail that gives the cause, the fix and
// the engine's own message, and the attribute path of the input at fault when the engine
// names one (api.Error.Field).

// addEngineError adds the diagnostic for a failed engine call. schemaType is the type of
// the resource's or data source's schema (req.Plan.Schema.Type() and friends), used to
// turn the engine's dotted field path into an attribute path; action says what failed, as
// a lowercase verb phrase ("create workspace \"team-a\"").
func addEngineError(diags *diag.Diagnostics, schemaType attr.Type, summary, action string, err error) {
	detail := engineErrorDetail(action, err)
	if p, ok := fieldPath(schemaType, api.FieldOf(err)); ok {
		diags.AddAttributeError(p, summary, detail)
		return
	}
	diags.AddError(summary, detail)
}

// engineErrorDetail writes cause, fix and original error, one paragraph each.
func engineErrorDetail(action string, err error) string {
	var cause, fix string
	code := api.CodeOf(err)
	switch {
	case client.IsUnreachable(err):
		cause = fmt.Sprintf("The provider could not reach the engine to %s.", action)
		fix = "Check that the engine is running with 'mlcompute status'. The embedded engine writes its log to engine.log in the provider's data_dir; an engine you run yourself is set with the provider's endpoint."
	case code == api.CodeInvalid:
		cause = fmt.Sprintf("The engine refused to %s because an input is not valid.", action)
		fix = "Correct the value the message below names, then plan and apply again."
	case code == api.CodeNotFound:
		cause = fmt.Sprintf("The engine could not %s because an object it needs does not exist.", action)
		fix = "Check the names and IDs in the configuration. If the object was deleted outside Terraform, 'terraform apply' recreates what the configuration declares."
	case code == api.CodeConflict:
		cause = fmt.Sprintf("The engine could not %s because it conflicts with what the engine already holds.", action)
		fix = "Resolve the conflict as the message below says, then apply again."
	case code == api.CodeQuotaExceeded:
		cause = fmt.Sprintf("The engine could not %s because a vCPU quota would be exceeded.", action)
		fix = "Raise the family's limit in the workspace's quotas, lower the node count, or choose a VM size of another family."
	case code == api.CodeUnauthorized:
		cause = fmt.Sprintf("The engine refused to %s because the provider's token is missing or wrong.", action)
		fix = "Set the provider's token (or MLCOMPUTE_TOKEN) to an API token of the engine: its token file's ('mlcompute serve --token-file') or one made with 'mlcompute token create'. An expired or revoked token must be replaced."
	case code == api.CodeForbidden:
		cause = fmt.Sprintf("The engine refused to %s because the provider's token lacks the permission (its role or workspaces do not allow it).", action)
		fix = "Use a token whose role and workspaces allow it (contributor or operator on this workspace), or ask an operator for one ('mlcompute token create')."
	case code == api.CodeUnavailable:
		cause = fmt.Sprintf("The engine could not %s because it is not available right now.", action)
		fix = "Wait a moment and apply again; 'mlcompute status' shows the engine's health."
	default:
		cause = fmt.Sprintf("The engine failed to %s.", action)
		fix = "This is probably a bug in the engine: retry, and if it persists report it with the engine's log (engine.log in the data_dir of the embedded engine)."
	}
	return cause + "\n\n" + fix + "\n\nEngine error: " + engineMessage(err)
}

// hclField writes an engine field path as the configuration spells it: list indices in
// brackets ("schedules.1.cron" becomes "schedules[1].cron"), as the docs write them.
func hclField(field string) string {
	parts := strings.Split(field, ".")
	var b strings.Builder
	for i, part := range parts {
		if _, err := strconv.Atoi(part); err == nil && i > 0 {
			b.WriteString("[" + part + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(part)
	}
	return b.String()
}

// engineMessage is an engine error's message with the field it names written as the
// configuration spells it (hclField).
func engineMessage(err error) string {
	msg := err.Error()
	if field := api.FieldOf(err); field != "" {
		msg = strings.ReplaceAll(msg, field, hclField(field))
	}
	return msg
}

// fieldPath turns an engine field path ("quotas.standardNCSv3Family",
// "scale_settings.max_node_count", "deployments.blue.instance_type", "schedules.0.cron")
// into an attribute path, walking the schema's type: an object's part is an attribute
// name, a map's part is a key (the rest of the field when the map holds primitives, so
// keys may contain dots), a list's part is an index. It stops at the deepest part it can
// resolve, and reports false when not even the first part is an attribute (for example
// "token", which belongs to the provider).
func fieldPath(schemaType attr.Type, field string) (path.Path, bool) {
	if field == "" || schemaType == nil {
		return path.Empty(), false
	}
	parts := strings.Split(field, ".")
	var p path.Path
	t := schemaType
	for i := 0; i < len(parts); i++ {
		part := parts[i]
		switch tt := t.(type) {
		case basetypes.ObjectType:
			next, ok := tt.AttrTypes[part]
			if !ok {
				return p, i > 0
			}
			if i == 0 {
				p = path.Root(part)
			} else {
				p = p.AtName(part)
			}
			t = next
		case basetypes.MapType:
			if _, nested := tt.ElemType.(basetypes.ObjectType); !nested {
				return p.AtMapKey(strings.Join(parts[i:], ".")), true
			}
			p = p.AtMapKey(part)
			t = tt.ElemType
		case basetypes.ListType:
			n, err := strconv.Atoi(part)
			if err != nil || n < 0 {
				return p, true
			}
			p = p.AtListIndex(n)
			t = tt.ElemType
		default:
			// A primitive, or a set (whose elements have no stable address): the
			// deepest attribute found so far is the one at fault.
			return p, i > 0
		}
	}
	return p, true
}

// readFound settles a Read's lookup of the object it manages: one deleted outside
// Terraform leaves the state (so the next plan creates it again), any other error becomes
// a diagnostic. title names the kind in Title Case ("Compute Cluster"), object the one
// read ("compute cluster \"cpu\" in workspace \"ml\""). It reports whether Read goes on.
func readFound(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse, err error, title, object string) bool {
	if api.IsNotFound(err) {
		tflog.Warn(ctx, strings.ToLower(title)+" deleted outside Terraform; removing it from state", map[string]any{"object": object})
		resp.State.RemoveResource(ctx)
		return false
	}
	if err != nil {
		addEngineError(&resp.Diagnostics, req.State.Schema.Type(), "Cannot Read "+title, "read "+object, err)
		return false
	}
	return true
}
