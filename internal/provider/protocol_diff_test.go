package provider

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// The cluster's protocol fast path (protocol.go) answers a no-change plan beside the
// framework. This test generates its cases from the schema, so that an attribute added
// later is covered without a new case: for every attribute (nested ones included), every
// prior value (as stored, changed, null) against every configured value (as in state,
// changed, unknown, null, where terraform allows it), with and without private state, with
// and without a prior identity and with deferrals allowed or not, the provider's server
// and the framework's own server get the same request and must give the same answer.

// schemaAttr is one attribute of the cluster's schema, by path.
type schemaAttr struct {
	path                         *tftypes.AttributePath
	typ                          tftypes.Type
	required, optional, computed bool
	nested                       map[string]schema.Attribute // a single nested attribute's
}

func clusterSchemaAttrs(t *testing.T) (map[string]schema.Attribute, []schemaAttr) {
	t.Helper()
	ctx := context.Background()
	var resp resource.SchemaResponse
	NewComputeClusterResource().Schema(ctx, resource.SchemaRequest{}, &resp)
	var out []schemaAttr
	var walk func(p *tftypes.AttributePath, attrs map[string]schema.Attribute)
	walk = func(p *tftypes.AttributePath, attrs map[string]schema.Attribute) {
		names := make([]string, 0, len(attrs))
		for n := range attrs {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			a := attrs[n]
			sa := schemaAttr{path: p.WithAttributeName(n), typ: a.GetType().TerraformType(ctx),
				required: a.IsRequired(), optional: a.IsOptional(), computed: a.IsComputed()}
			if nested, ok := a.(schema.SingleNestedAttribute); ok {
				sa.nested = nested.Attributes
				out = append(out, sa)
				walk(sa.path, nested.Attributes)
				continue
			}
			out = append(out, sa)
		}
	}
	walk(tftypes.NewAttributePath(), resp.Schema.Attributes)
	return resp.Schema.Attributes, out
}

// proposedNew is terraform's proposed new state (objchange.ProposedNew) for this schema:
// a configured value, else for a computed attribute the prior one.
func proposedNew(ctx context.Context, attrs map[string]schema.Attribute, prior, config tftypes.Value) tftypes.Value {
	if config.IsNull() || !config.IsKnown() {
		return config
	}
	var cv, pv map[string]tftypes.Value
	_ = config.As(&cv)
	if !prior.IsNull() {
		_ = prior.As(&pv)
	}
	out := map[string]tftypes.Value{}
	for name, a := range attrs {
		c, p := cv[name], pv[name]
		if p.Type() == nil {
			p = tftypes.NewValue(c.Type(), nil)
		}
		switch {
		case a.IsComputed() && c.IsNull():
			out[name] = p
		default:
			if nested, ok := a.(schema.SingleNestedAttribute); ok {
				out[name] = proposedNew(ctx, nested.Attributes, p, c)
			} else {
				out[name] = c
			}
		}
	}
	return tftypes.NewValue(config.Type(), out)
}

// setAt returns v with the value at p replaced by x (the parents of p being objects).
func setAt(t *testing.T, v tftypes.Value, p *tftypes.AttributePath, x tftypes.Value) tftypes.Value {
	t.Helper()
	out, err := tftypes.Transform(v, func(ap *tftypes.AttributePath, cur tftypes.Value) (tftypes.Value, error) {
		if ap.Equal(p) {
			return x, nil
		}
		return cur, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// valueAt returns the value at p, or false when a parent is null.
func valueAt(v tftypes.Value, p *tftypes.AttributePath) (tftypes.Value, bool) {
	got, _, err := tftypes.WalkAttributePath(v, p)
	if err != nil {
		return tftypes.Value{}, false
	}
	x, ok := got.(tftypes.Value)
	return x, ok
}

// changed returns a known value of typ that differs from v, or false for a kind it cannot
// change (an object changes through its attributes).
func changed(typ tftypes.Type, v tftypes.Value) (tftypes.Value, bool) {
	switch {
	case typ.Is(tftypes.String):
		var s string
		if !v.IsNull() {
			_ = v.As(&s)
		}
		return tftypes.NewValue(typ, s+"x"), true
	case typ.Is(tftypes.Number):
		n := new(big.Float)
		if !v.IsNull() {
			_ = v.As(&n)
		}
		return tftypes.NewValue(typ, new(big.Float).Add(n, big.NewFloat(1))), true
	case typ.Is(tftypes.Bool):
		var b bool
		if !v.IsNull() {
			_ = v.As(&b)
		}
		return tftypes.NewValue(typ, !b), true
	case typ.Is(tftypes.Map{}):
		m := map[string]tftypes.Value{}
		if !v.IsNull() {
			_ = v.As(&m)
		}
		elem := typ.(tftypes.Map).ElementType
		n := map[string]tftypes.Value{"added": tftypes.NewValue(elem, "v")}
		for k, x := range m {
			n[k] = x
		}
		if !elem.Is(tftypes.String) {
			return tftypes.Value{}, false
		}
		return tftypes.NewValue(typ, n), true
	}
	return tftypes.Value{}, false
}

func TestClusterFastPathDifferentialFromSchema(t *testing.T) {
	ctx := context.Background()
	fast, framework := bothServers(t)
	f := fast.cluster
	typ := f.stateType
	attrs, paths := clusterSchemaAttrs(t)
	str := func(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }
	num := func(n int64) tftypes.Value { return tftypes.NewValue(tftypes.Number, new(big.Float).SetInt64(n)) }
	// A stored cluster as Read leaves it: every attribute known.
	prior := clusterObject(t, f, map[string]tftypes.Value{
		"id": str("/workspaces/lab/computes/cpu"), "name": str("cpu"), "workspace_id": str("/workspaces/lab"),
		"vm_size": str("standard_ds3_v2"), "vm_priority": str("Dedicated"), "description": str(""),
		"tags":               tftypes.NewValue(typ.AttributeTypes["tags"], map[string]tftypes.Value{}),
		"current_node_count": num(0), "target_node_count": num(0), "allocation_state": str("Steady"),
		"created_on": str("2026-01-05T09:00:00Z"),
		"scale_settings": tftypes.NewValue(typ.AttributeTypes["scale_settings"], map[string]tftypes.Value{
			"min_node_count": num(0), "max_node_count": num(2), "scale_down_nodes_after_idle_duration": str("PT120S"),
		}),
		"node_state_counts": tftypes.NewValue(typ.AttributeTypes["node_state_counts"], map[string]tftypes.Value{
			"idle": num(0), "running": num(0), "preparing": num(0), "leaving": num(0), "unusable": num(0), "preempted": num(0),
		}),
		"timeouts": tftypes.NewValue(typ.AttributeTypes["timeouts"], map[string]tftypes.Value{
			"create": str("5m"), "update": tftypes.NewValue(tftypes.String, nil), "delete": tftypes.NewValue(tftypes.String, nil),
		}),
	})
	if !prior.IsFullyKnown() {
		t.Fatal("the base prior state is not fully known")
	}
	// The configuration that matches it: every argument as stored, computed-only ones null.
	config := prior
	for _, a := range paths {
		if a.computed && !a.optional && !a.required {
			if _, ok := valueAt(config, a.path); ok {
				config = setAt(t, config, a.path, tftypes.NewValue(a.typ, nil))
			}
		}
	}

	type variant struct {
		name  string
		value func(a schemaAttr, base tftypes.Value) (tftypes.Value, bool)
	}
	same := variant{"as stored", func(_ schemaAttr, base tftypes.Value) (tftypes.Value, bool) { return base, true }}
	change := variant{"changed", func(a schemaAttr, base tftypes.Value) (tftypes.Value, bool) { return changed(a.typ, base) }}
	null := variant{"null", func(a schemaAttr, _ tftypes.Value) (tftypes.Value, bool) { return tftypes.NewValue(a.typ, nil), true }}
	unknown := variant{"unknown", func(a schemaAttr, _ tftypes.Value) (tftypes.Value, bool) {
		return tftypes.NewValue(a.typ, tftypes.UnknownValue), true
	}}

	var cases, fastAnswers int
	for _, a := range paths {
		basePrior, ok := valueAt(prior, a.path)
		if !ok {
			continue
		}
		baseConfig, _ := valueAt(config, a.path)
		for _, pv := range []variant{same, change, null} {
			if pv.name == "null" && a.required {
				continue // a stored required attribute is never null
			}
			p, ok := pv.value(a, basePrior)
			if !ok {
				continue
			}
			priorCase := setAt(t, prior, a.path, p)
			for _, cv := range []variant{same, change, unknown, null} {
				settable := a.required || a.optional
				if !settable && cv.name != "null" {
					continue // terraform refuses a computed-only attribute in configuration
				}
				if a.required && cv.name == "null" {
					continue // terraform refuses a missing required attribute
				}
				base := baseConfig
				if cv.name == "as stored" && settable {
					base = p // configured as this prior holds it
				}
				c, ok := cv.value(a, base)
				if !ok {
					continue
				}
				configCase := setAt(t, config, a.path, c)
				proposed := proposedNew(ctx, attrs, priorCase, configCase)
				for _, private := range [][]byte{nil, []byte(`{"k":"InYi"}`)} {
					for _, identity := range []bool{false, true} {
						for _, deferral := range []bool{false, true} {
							name := fmt.Sprintf("%s prior %s config %s private %v identity %v deferral %v",
								a.path, pv.name, cv.name, private != nil, identity, deferral)
							req := &tfprotov6.PlanResourceChangeRequest{
								TypeName: clusterTypeName, PriorState: dynamic(t, typ, priorCase),
								ProposedNewState: dynamic(t, typ, proposed), Config: dynamic(t, typ, configCase),
								PriorPrivate: private, ClientCapabilities: &tfprotov6.PlanResourceChangeClientCapabilities{DeferralAllowed: deferral},
							}
							if identity {
								idType := tftypes.Object{AttributeTypes: map[string]tftypes.Type{"id": tftypes.String}}
								req.PriorIdentity = &tfprotov6.ResourceIdentityData{IdentityData: dynamic(t, idType,
									tftypes.NewValue(idType, map[string]tftypes.Value{"id": str("/workspaces/lab/computes/cpu")}))}
							}
							cases++
							if f.unchanged(req) {
								fastAnswers++
							}
							comparePlans(t, ctx, name, typ, fast, framework, req)
						}
					}
				}
			}
		}
	}
	t.Logf("%d generated cases over %d attribute paths; the fast path answered %d", cases, len(paths), fastAnswers)
	if fastAnswers == 0 {
		t.Fatal("the fast path answered none of the generated cases: they prove nothing about it")
	}
}

// comparePlans sends req to both servers and reports any difference in their answers.
func comparePlans(t *testing.T, ctx context.Context, name string, typ tftypes.Object, fast *protocolServer, framework tfprotov6.ProviderServer, req *tfprotov6.PlanResourceChangeRequest) {
	t.Helper()
	got, gotErr := fast.PlanResourceChange(ctx, req)
	want, wantErr := framework.PlanResourceChange(ctx, req)
	if (gotErr == nil) != (wantErr == nil) {
		t.Errorf("%s: error: fast path %v, framework %v", name, gotErr, wantErr)
		return
	}
	if gotErr != nil {
		return
	}
	diags := func(ds []*tfprotov6.Diagnostic) []string {
		var out []string
		for _, d := range ds {
			out = append(out, fmt.Sprintf("%v %s: %s at %v", d.Severity, d.Summary, d.Detail, d.Attribute))
		}
		return out
	}
	if g, w := diags(got.Diagnostics), diags(want.Diagnostics); !slices.Equal(g, w) {
		t.Errorf("%s: diagnostics:\nfast path %q\nframework %q", name, g, w)
	}
	plan := func(dv *tfprotov6.DynamicValue) string {
		if dv == nil {
			return "<none>"
		}
		v, err := dv.Unmarshal(typ)
		if err != nil {
			return "undecodable: " + err.Error()
		}
		return v.String()
	}
	if g, w := plan(got.PlannedState), plan(want.PlannedState); g != w {
		t.Errorf("%s: planned state:\nfast path %s\nframework %s", name, g, w)
	}
	paths := func(ps []*tftypes.AttributePath) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.String())
		}
		sort.Strings(out)
		return out
	}
	if g, w := paths(got.RequiresReplace), paths(want.RequiresReplace); !slices.Equal(g, w) {
		t.Errorf("%s: requires replace: fast path %v, framework %v", name, g, w)
	}
	if string(got.PlannedPrivate) != string(want.PlannedPrivate) {
		t.Errorf("%s: planned private: fast path %q, framework %q", name, got.PlannedPrivate, want.PlannedPrivate)
	}
	if fmt.Sprint(got.Deferred) != fmt.Sprint(want.Deferred) {
		t.Errorf("%s: deferred: fast path %v, framework %v", name, got.Deferred, want.Deferred)
	}
	identity := func(id *tfprotov6.ResourceIdentityData) string {
		if id == nil || id.IdentityData == nil {
			return "<none>"
		}
		return fmt.Sprintf("%x%s", id.IdentityData.MsgPack, id.IdentityData.JSON)
	}
	if g, w := identity(got.PlannedIdentity), identity(want.PlannedIdentity); g != w {
		t.Errorf("%s: planned identity: fast path %s, framework %s", name, g, w)
	}
}
