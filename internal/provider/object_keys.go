package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/zclconf/go-cty/cty"
)

// Terraform converts an object value such as `scale_settings = { max_node_countt = 3 }` to
// the attribute's type before the provider sees it, and the conversion drops keys the type
// does not have (terraform-plugin-framework#1210): a misspelled key vanishes without a word
// and the plan uses the default. The provider cannot see the dropped key in what terraform
// sends, so it reads the configuration's own text: the root module's .tf files in the
// working directory terraform runs in (and runs its provider in), where it finds each
// object written inline in a resource of this provider and checks its keys against the
// attribute's schema. Objects built elsewhere (variables, locals, modules, JSON syntax)
// are not seen; the docs' common mistakes say so.
//
// The files are read once per provider process. A resource's unknown keys are reported
// by its own plan (reportObjectKeys, from ModifyPlan), on the attribute's path, so they
// follow -target and are not reported for a destroy; a resource whose name is not a
// literal in the text cannot be told apart from others of its type at plan, and its keys
// are reported when the provider's configuration is validated (reportUnmatchedObjectKeys).
// Each key is reported once per process, whatever the number of provider blocks.

// objectKeyFinding is one unknown key of an inline object in a resource block.
type objectKeyFinding struct {
	resourceType string
	// name is the block's name attribute when the text fixes it (a string literal), which
	// the planned name matches; empty otherwise.
	name    string
	at      path.Path
	summary string
	detail  string
}

// objectKeyScan holds the findings of the working directory, scanned once per process.
var objectKeyScan struct {
	once     sync.Once
	findings []objectKeyFinding
	mu       sync.Mutex
	reported map[int]bool
}

// scannedObjectKeys returns the working directory's findings, scanning it the first time.
func scannedObjectKeys(ctx context.Context, resources []func() resource.Resource) []objectKeyFinding {
	objectKeyScan.once.Do(func() {
		if dir, err := os.Getwd(); err == nil {
			objectKeyScan.findings = unknownObjectKeys(ctx, dir, resources)
		}
		objectKeyScan.reported = map[int]bool{}
	})
	return objectKeyScan.findings
}

// reportOnce adds the findings match selects, each once per process.
func reportOnce(diags *diag.Diagnostics, findings []objectKeyFinding, match func(objectKeyFinding) bool) {
	objectKeyScan.mu.Lock()
	defer objectKeyScan.mu.Unlock()
	for i, f := range findings {
		if !match(f) || objectKeyScan.reported[i] {
			continue
		}
		objectKeyScan.reported[i] = true
		if f.name == "" {
			diags.AddError(f.summary, f.detail)
		} else {
			diags.AddAttributeError(f.at, f.summary, f.detail)
		}
	}
}

// reportObjectKeys reports, from the plan of a resource of type resourceType (not a
// destroy), the unknown keys written in the block whose name is the planned name.
func reportObjectKeys(ctx context.Context, resourceType string, req resource.ModifyPlanRequest, diags *diag.Diagnostics) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var name types.String
	if req.Plan.GetAttribute(ctx, path.Root("name"), &name).HasError() || name.IsNull() || name.IsUnknown() {
		return
	}
	findings := scannedObjectKeys(ctx, (&mlcomputeProvider{}).Resources(ctx))
	reportOnce(diags, findings, func(f objectKeyFinding) bool {
		return f.resourceType == resourceType && f.name == name.ValueString()
	})
}

// reportUnmatchedObjectKeys reports the unknown keys of blocks whose name is not a literal.
func reportUnmatchedObjectKeys(ctx context.Context, resources []func() resource.Resource, diags *diag.Diagnostics) {
	reportOnce(diags, scannedObjectKeys(ctx, resources), func(f objectKeyFinding) bool { return f.name == "" })
}

// unknownObjectKeys returns a finding for every key of an inline object value, in a
// resource of this provider in the .tf files of dir, that its attribute does not have.
func unknownObjectKeys(ctx context.Context, dir string, resources []func() resource.Resource) []objectKeyFinding {
	files, _ := filepath.Glob(filepath.Join(dir, "*.tf"))
	if len(files) == 0 {
		return nil
	}
	schemas := map[string]map[string]schema.Attribute{}
	for _, newResource := range resources {
		r := newResource()
		var md resource.MetadataResponse
		r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "mlcompute"}, &md)
		var sr resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &sr)
		schemas[md.TypeName] = sr.Schema.Attributes
	}
	var findings []objectKeyFinding
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		file, parseDiags := hclsyntax.ParseConfig(src, filepath.Base(name), hcl.InitialPos)
		if parseDiags.HasErrors() {
			continue // terraform reports the syntax
		}
		body, ok := file.Body.(*hclsyntax.Body)
		if !ok {
			continue
		}
		for _, block := range body.Blocks {
			if block.Type != "resource" || len(block.Labels) != 2 {
				continue
			}
			attrs, ok := schemas[block.Labels[0]]
			if !ok {
				continue
			}
			c := &keyChecker{block: objectKeyFinding{resourceType: block.Labels[0]}, where: block.Labels[0] + "." + block.Labels[1]}
			if a, ok := block.Body.Attributes["name"]; ok {
				if v, d := a.Expr.Value(nil); !d.HasErrors() && v.IsKnown() && !v.IsNull() && v.Type() == cty.String {
					c.block.name = v.AsString()
				}
			}
			inOrder := make([]*hclsyntax.Attribute, 0, len(block.Body.Attributes))
			for _, a := range block.Body.Attributes {
				inOrder = append(inOrder, a)
			}
			slices.SortFunc(inOrder, func(a, b *hclsyntax.Attribute) int { return a.SrcRange.Start.Byte - b.SrcRange.Start.Byte })
			for _, a := range inOrder {
				if s, ok := attrs[a.Name]; ok {
					c.attribute(a.Name, path.Root(a.Name), a.Expr, s)
				}
			}
			findings = append(findings, c.findings...)
		}
	}
	return findings
}

// keyChecker collects the unknown keys of one resource block.
type keyChecker struct {
	block    objectKeyFinding // the block's type and name
	where    string           // the block's address, for messages
	findings []objectKeyFinding
}

// attribute checks expr, the value of attribute s at p (shown as name), against s's
// nested schema.
func (c *keyChecker) attribute(name string, p path.Path, expr hclsyntax.Expression, s schema.Attribute) {
	switch s := s.(type) {
	case schema.SingleNestedAttribute:
		c.object(name, p, expr, s.Attributes)
	case schema.MapNestedAttribute:
		if obj, ok := expr.(*hclsyntax.ObjectConsExpr); ok {
			for _, item := range obj.Items {
				key, ok := objectKey(item.KeyExpr)
				if !ok {
					continue
				}
				c.object(fmt.Sprintf("%s[%q]", name, key), p.AtMapKey(key), item.ValueExpr, s.NestedObject.Attributes)
			}
		}
	case schema.ListNestedAttribute:
		c.elements(name, p, expr, s.NestedObject.Attributes)
	case schema.SetNestedAttribute:
		c.elements(name, p, expr, s.NestedObject.Attributes)
	}
}

func (c *keyChecker) elements(name string, p path.Path, expr hclsyntax.Expression, attrs map[string]schema.Attribute) {
	if tuple, ok := expr.(*hclsyntax.TupleConsExpr); ok {
		for i, e := range tuple.Exprs {
			c.object(fmt.Sprintf("%s[%d]", name, i), p.AtListIndex(i), e, attrs)
		}
	}
}

// object checks an inline object's keys against attrs, and its values in turn.
func (c *keyChecker) object(name string, p path.Path, expr hclsyntax.Expression, attrs map[string]schema.Attribute) {
	obj, ok := expr.(*hclsyntax.ObjectConsExpr)
	if !ok {
		return // a reference or a function's result: its keys are not in the text
	}
	for _, item := range obj.Items {
		key, ok := objectKey(item.KeyExpr)
		if !ok {
			continue
		}
		s, ok := attrs[key]
		if !ok {
			known := make([]string, 0, len(attrs))
			for k := range attrs {
				known = append(known, k)
			}
			slices.Sort(known)
			r := item.KeyExpr.Range()
			f := c.block
			f.at, f.summary = p, "Unknown Attribute In Object"
			f.detail = fmt.Sprintf("%s:%d: %s in %s has no attribute %q. Terraform drops keys an object's type does not have "+
				"without a word (terraform-plugin-framework#1210), so the plan would not use this value.\n\n"+
				"Correct or remove %q: %s has %s.", r.Filename, r.Start.Line, name, c.where, key, key, name,
				strings.Join(known, ", "))
			c.findings = append(c.findings, f)
			continue
		}
		c.attribute(name+"."+key, p.AtName(key), item.ValueExpr, s)
	}
}

// objectKey returns an object item's key when the text fixes it: a bare name or a string.
func objectKey(expr hclsyntax.Expression) (string, bool) {
	if name := hcl.ExprAsKeyword(expr); name != "" {
		return name, true
	}
	v, d := expr.Value(nil)
	if d.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type() != cty.String {
		return "", false
	}
	return v.AsString(), true
}
