// Package validators adapts the engine's shared validation functions (package
// internal/engine/validation) to terraform-plugin-framework validators, so that plan-time
// checks and the engine's own checks are the same Go code and say the same words.
package validators

import (
	"context"
	"maps"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// StringFunc returns a validator that runs check on a known string value and reports its
// error on the attribute, with summary as the diagnostic's Title Case summary ("Invalid
// Workspace Name") and the error's message, which names the rule, as its detail.
// description says what a valid value is, in one sentence.
func StringFunc(summary, description string, check func(string) error) validator.String {
	return stringFunc{summary: summary, description: description, check: check}
}

type stringFunc struct {
	summary     string
	description string
	check       func(string) error
}

func (v stringFunc) Description(context.Context) string         { return v.description }
func (v stringFunc) MarkdownDescription(context.Context) string { return v.description }

func (v stringFunc) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := v.check(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, v.summary, err.Error())
	}
}

// Int64MapFunc returns a validator for a map of numbers that runs check on every entry
// whose value is known, in key order, and reports each error on that entry's path
// (for example quotas["standardNCSv3Family"]), as StringFunc does.
func Int64MapFunc(summary, description string, check func(key string, value int64) error) validator.Map {
	return int64MapFunc{summary: summary, description: description, check: check}
}

type int64MapFunc struct {
	summary     string
	description string
	check       func(string, int64) error
}

func (v int64MapFunc) Description(context.Context) string         { return v.description }
func (v int64MapFunc) MarkdownDescription(context.Context) string { return v.description }

func (v int64MapFunc) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	elems := req.ConfigValue.Elements()
	for _, key := range slices.Sorted(maps.Keys(elems)) {
		n, ok := elems[key].(types.Int64)
		if !ok || n.IsNull() || n.IsUnknown() {
			continue
		}
		if err := v.check(key, n.ValueInt64()); err != nil {
			resp.Diagnostics.AddAttributeError(req.Path.AtMapKey(key), v.summary, err.Error())
		}
	}
}
