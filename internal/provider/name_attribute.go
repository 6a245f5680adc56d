package provider

import (
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/provider/validators"
)

// nameAttribute is a resource's required name: checked at plan time with the engine's own
// rule, and replacing the resource when it changes. The description is lead, the rule in
// parentheses, then rest; summary titles the error for a name that breaks the rule.
func nameAttribute(rule validation.NameRule, summary, lead, rest string) schema.StringAttribute {
	return schema.StringAttribute{
		MarkdownDescription: lead + " (" + rule.Explain + "; pattern `" + rule.Pattern.String() + "`). " + rest,
		Required:            true,
		PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
		Validators: []validator.String{
			validators.StringFunc(summary, "the name must be "+rule.Explain, func(name string) error {
				return rule.Check("name", name)
			}),
		},
	}
}
