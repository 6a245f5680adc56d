package provider

import (
	"context"
	"math/big"
	"testing"

	fwprovider "github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
)

// The protocol fast path must answer exactly as the framework does. These tests put the
// same requests to the provider's server and to the framework's own server and compare.

// clusterObject is a cluster object of the schema's type: the attributes given, the rest null.
func clusterObject(t *testing.T, f *clusterFastPath, attrs map[string]tftypes.Value) tftypes.Value {
	t.Helper()
	vals := map[string]tftypes.Value{}
	for name, typ := range f.stateType.AttributeTypes {
		if v, ok := attrs[name]; ok {
			vals[name] = v
		} else {
			vals[name] = tftypes.NewValue(typ, nil)
		}
	}
	return tftypes.NewValue(f.stateType, vals)
}

func dynamic(t *testing.T, typ tftypes.Type, v tftypes.Value) *tfprotov6.DynamicValue {
	t.Helper()
	dv, err := tfprotov6.NewDynamicValue(typ, v)
	if err != nil {
		t.Fatal(err)
	}
	return &dv
}

// bothServers returns the provider's protocol server (with its cluster fast path) and
// the framework's server of the same provider, to compare their answers.
func bothServers(t *testing.T) (*protocolServer, tfprotov6.ProviderServer) {
	t.Helper()
	srv, err := NewProtocol6Server("test")()
	if err != nil {
		t.Fatal(err)
	}
	framework, err := providerserver.NewProtocol6WithError(New("test")())()
	if err != nil {
		t.Fatal(err)
	}
	return srv.(*protocolServer), framework
}

func TestClusterFastPathPlansAsTheFramework(t *testing.T) {
	ctx := context.Background()
	fast, framework := bothServers(t)
	f := fast.cluster
	typ := f.stateType
	str := func(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }
	num := func(n int64) tftypes.Value { return tftypes.NewValue(tftypes.Number, new(big.Float).SetInt64(n)) }
	tags := func(kv ...string) tftypes.Value {
		m := map[string]tftypes.Value{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = str(kv[i+1])
		}
		return tftypes.NewValue(typ.AttributeTypes["tags"], m)
	}
	settings := func(minNodes, maxNodes any, idle any) tftypes.Value {
		v := func(x any, t tftypes.Type) tftypes.Value {
			switch x := x.(type) {
			case int:
				return num(int64(x))
			case string:
				return str(x)
			}
			return tftypes.NewValue(t, nil)
		}
		return tftypes.NewValue(typ.AttributeTypes["scale_settings"], map[string]tftypes.Value{
			"min_node_count": v(minNodes, tftypes.Number), "max_node_count": v(maxNodes, tftypes.Number),
			"scale_down_nodes_after_idle_duration": v(idle, tftypes.String),
		})
	}
	counts := tftypes.NewValue(typ.AttributeTypes["node_state_counts"], map[string]tftypes.Value{
		"idle": num(0), "running": num(0), "preparing": num(0), "leaving": num(0), "unusable": num(0), "preempted": num(0),
	})
	// state is what Read leaves: every attribute known, runtime ones included.
	state := func(description string, tagsValue, s tftypes.Value) tftypes.Value {
		return clusterObject(t, f, map[string]tftypes.Value{
			"id": str("/workspaces/lab/computes/cpu"), "name": str("cpu"), "workspace_id": str("/workspaces/lab"),
			"vm_size": str("standard_ds3_v2"), "vm_priority": str("Dedicated"), "scale_settings": s,
			"description": str(description), "tags": tagsValue, "current_node_count": num(0), "target_node_count": num(0),
			"allocation_state": str("Steady"), "node_state_counts": counts, "created_on": str("2026-01-05T09:00:00Z"),
		})
	}
	// config sets what a configuration sets; nil leaves an optional attribute out.
	config := func(description, tagsValue, s tftypes.Value) tftypes.Value {
		attrs := map[string]tftypes.Value{
			"name": str("cpu"), "workspace_id": str("/workspaces/lab"), "vm_size": str("standard_ds3_v2"), "scale_settings": s,
		}
		if description.Type() != nil {
			attrs["description"] = description
		}
		if tagsValue.Type() != nil {
			attrs["tags"] = tagsValue
		}
		return clusterObject(t, f, attrs)
	}
	var none tftypes.Value
	tests := []struct {
		name             string
		prior, config    tftypes.Value
		proposed         tftypes.Value // the prior state unless set
		private          []byte
		fast             bool
		wantPlannedDescr string // the framework's planned description, to show the case means what it says
	}{
		{name: "nothing configured beyond the required", prior: state("", tags(), settings(0, 2, "PT120S")),
			config: config(none, none, settings(nil, 2, nil)), fast: true, wantPlannedDescr: ""},
		{name: "everything configured", prior: state("d", tags("team", "ml"), settings(2, 4, "PT5M")),
			config: config(str("d"), tags("team", "ml"), settings(2, 4, "PT5M")), fast: true, wantPlannedDescr: "d"},
		{name: "description removed from the configuration", prior: state("d", tags(), settings(0, 2, "PT120S")),
			config: config(none, none, settings(nil, 2, nil)), wantPlannedDescr: ""},
		{name: "tags removed from the configuration", prior: state("", tags("team", "ml"), settings(0, 2, "PT120S")),
			config: config(none, none, settings(nil, 2, nil))},
		{name: "minimum removed from the configuration", prior: state("", tags(), settings(2, 2, "PT120S")),
			config: config(none, none, settings(nil, 2, nil))},
		{name: "idle duration removed from the configuration", prior: state("", tags(), settings(0, 2, "PT5M")),
			config: config(none, none, settings(nil, 2, nil))},
		{name: "a change", prior: state("", tags(), settings(0, 2, "PT120S")),
			config:   config(none, none, settings(nil, 3, nil)),
			proposed: state("", tags(), settings(0, 3, "PT120S"))},
		{name: "private state", prior: state("", tags(), settings(0, 2, "PT120S")),
			config: config(none, none, settings(nil, 2, nil)), private: []byte(`{"k":"InYi"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proposed := tt.proposed
			if proposed.Type() == nil {
				proposed = tt.prior
			}
			req := &tfprotov6.PlanResourceChangeRequest{
				TypeName: clusterTypeName, PriorState: dynamic(t, typ, tt.prior), ProposedNewState: dynamic(t, typ, proposed),
				Config: dynamic(t, typ, tt.config), PriorPrivate: tt.private,
			}
			if got := f.unchanged(req); got != tt.fast {
				t.Fatalf("fast path taken: %v, want %v", got, tt.fast)
			}
			got, err := fast.PlanResourceChange(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			want, err := framework.PlanResourceChange(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if len(want.Diagnostics) != 0 || len(got.Diagnostics) != 0 {
				t.Fatalf("diagnostics: fast path %v, framework %v", got.Diagnostics, want.Diagnostics)
			}
			gotPlan, err := got.PlannedState.Unmarshal(typ)
			if err != nil {
				t.Fatal(err)
			}
			wantPlan, err := want.PlannedState.Unmarshal(typ)
			if err != nil {
				t.Fatal(err)
			}
			if !gotPlan.Equal(wantPlan) {
				t.Errorf("planned state:\nfast path %v\nframework %v", gotPlan, wantPlan)
			}
			if len(got.RequiresReplace) != len(want.RequiresReplace) {
				t.Errorf("requires replace: fast path %v, framework %v", got.RequiresReplace, want.RequiresReplace)
			}
			if string(got.PlannedPrivate) != string(want.PlannedPrivate) {
				t.Errorf("planned private: fast path %q, framework %q", got.PlannedPrivate, want.PlannedPrivate)
			}
			if tt.fast && !wantPlan.Equal(tt.prior) {
				t.Errorf("the framework plans a change where the fast path saw none:\n%v", wantPlan)
			}
			descr, _, err := tftypes.WalkAttributePath(wantPlan, tftypes.NewAttributePath().WithAttributeName("description"))
			var d string
			if err != nil || descr.(tftypes.Value).As(&d) != nil || (tt.wantPlannedDescr != "" || tt.fast) && d != tt.wantPlannedDescr {
				t.Errorf("framework's planned description %v, want %q", descr, tt.wantPlannedDescr)
			}
		})
	}
}

func TestClusterFastPathReadsAsTheFramework(t *testing.T) {
	ctx := context.Background()
	e := enginetest.Start(t, enginetest.Options{})
	c := e.Client(t, "")
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCompute(ctx, "lab", api.ComputeSpec{
		Name: "cpu", Type: api.TypeComputeCluster, VMSize: "Standard_DS1_v2", VMPriority: api.PriorityDedicated,
		ScaleSettings: &api.ScaleSettings{MaxNodeCount: 2}, Tags: map[string]string{"team": "ml"},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCompute(ctx, "lab", api.ComputeSpec{Name: "box", Type: api.TypeComputeInstance, VMSize: "Standard_DS1_v2"}); err != nil {
		t.Fatal(err)
	}

	// Both servers are configured against the same engine, as terraform configures them.
	configure := func(s tfprotov6.ProviderServer) {
		var sr fwprovider.SchemaResponse
		(&mlcomputeProvider{}).Schema(ctx, fwprovider.SchemaRequest{}, &sr)
		typ := sr.Schema.Type().TerraformType(ctx).(tftypes.Object)
		cfg := tftypes.NewValue(typ, map[string]tftypes.Value{
			"endpoint": tftypes.NewValue(tftypes.String, e.Endpoint),
			"token":    tftypes.NewValue(tftypes.String, nil), "data_dir": tftypes.NewValue(tftypes.String, nil),
			"ca_certificate": tftypes.NewValue(tftypes.String, nil),
		})
		resp, err := s.ConfigureProvider(ctx, &tfprotov6.ConfigureProviderRequest{Config: dynamic(t, typ, cfg)})
		if err != nil || len(resp.Diagnostics) != 0 {
			t.Fatalf("configure: %v %v", err, resp.Diagnostics)
		}
	}
	fast, framework := bothServers(t)
	configure(fast)
	configure(framework)
	f := fast.cluster
	str := func(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }
	timeoutsType := f.stateType.AttributeTypes["timeouts"].(tftypes.Object)
	timeouts := tftypes.NewValue(timeoutsType, map[string]tftypes.Value{
		"create": str("5m"), "update": tftypes.NewValue(tftypes.String, nil), "delete": tftypes.NewValue(tftypes.String, nil),
	})

	idType := tftypes.Object{AttributeTypes: map[string]tftypes.Type{"id": tftypes.String}}
	identity := &tfprotov6.ResourceIdentityData{IdentityData: dynamic(t, idType,
		tftypes.NewValue(idType, map[string]tftypes.Value{"id": str("/workspaces/lab/computes/cpu")}))}
	tests := []struct {
		name     string
		state    map[string]tftypes.Value
		identity *tfprotov6.ResourceIdentityData
		fast     bool
	}{
		// The framework owns identities: a read that carries one is its to answer.
		{name: "with a resource identity", state: map[string]tftypes.Value{"id": str("/workspaces/lab/computes/cpu")}, identity: identity},
		{name: "import: the ID alone", state: map[string]tftypes.Value{"id": str("/workspaces/lab/computes/cpu")}, fast: true},
		{name: "configured spelling and timeouts are kept", fast: true, state: map[string]tftypes.Value{
			"id": str("/workspaces/lab/computes/cpu"), "vm_size": str("standard_ds1_v2"), "timeouts": timeouts,
			"description": str("changed outside"),
		}},
		{name: "another size's spelling is not", fast: true, state: map[string]tftypes.Value{
			"id": str("/workspaces/lab/computes/cpu"), "vm_size": str("Standard_DS2_v2"),
		}},
		{name: "deleted outside terraform", state: map[string]tftypes.Value{"id": str("/workspaces/lab/computes/gone")}},
		{name: "not a cluster", state: map[string]tftypes.Value{"id": str("/workspaces/lab/computes/box")}},
		{name: "not a compute ID", state: map[string]tftypes.Value{"id": str("/workspaces/lab")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &tfprotov6.ReadResourceRequest{TypeName: clusterTypeName, CurrentState: dynamic(t, f.stateType, clusterObject(t, f, tt.state)),
				CurrentIdentity: tt.identity}
			if resp, _ := f.read(ctx, fast.provider.engine(), req); (resp != nil) != tt.fast {
				t.Fatalf("fast path answered: %v, want %v", resp != nil, tt.fast)
			}
			got, err := fast.ReadResource(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			want, err := framework.ReadResource(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Diagnostics) != len(want.Diagnostics) {
				t.Fatalf("diagnostics: fast path %v, framework %v", got.Diagnostics, want.Diagnostics)
			}
			for i := range got.Diagnostics {
				if g, w := got.Diagnostics[i], want.Diagnostics[i]; g.Severity != w.Severity || g.Summary != w.Summary || g.Detail != w.Detail {
					t.Errorf("diagnostic %d: fast path %+v, framework %+v", i, g, w)
				}
			}
			if (got.NewState == nil) != (want.NewState == nil) {
				t.Fatalf("new state: fast path %v, framework %v", got.NewState, want.NewState)
			}
			if got.NewState == nil {
				return
			}
			gotState, err := got.NewState.Unmarshal(f.stateType)
			if err != nil {
				t.Fatal(err)
			}
			wantState, err := want.NewState.Unmarshal(f.stateType)
			if err != nil {
				t.Fatal(err)
			}
			if !gotState.Equal(wantState) {
				t.Errorf("new state:\nfast path %v\nframework %v", gotState, wantState)
			}
			if tt.fast && gotState.IsNull() {
				t.Error("the fast path's state is null")
			}
		})
	}
}
