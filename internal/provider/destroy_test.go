package provider

import (
	"context"
	"errors"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

func TestDestroyCommand(t *testing.T) {
	cases := []struct {
		args string
		env  map[string]string
		want bool
	}{
		{args: "destroy -auto-approve", want: true},
		{args: "-chdir=infra destroy", want: true},
		{args: "apply -destroy -auto-approve", want: true},
		{args: "apply --destroy", want: true},
		{args: "plan -destroy=true -out=p", want: true},
		{args: "plan", env: map[string]string{"TF_CLI_ARGS_plan": "-destroy"}, want: true},
		{args: "apply", env: map[string]string{"TF_CLI_ARGS": "-destroy -input=false"}, want: true},
		{args: "apply -auto-approve", want: false},
		{args: "plan -destroy=false", want: false},
		{args: "plan", env: map[string]string{"TF_CLI_ARGS_apply": "-destroy"}, want: false},
		{args: "validate", want: false},
		{args: "-chdir=destroy plan", want: false},
		{args: "", want: false},
	}
	for _, tc := range cases {
		getenv := func(k string) string { return tc.env[k] }
		if got := destroyCommand(strings.Fields(tc.args), getenv); got != tc.want {
			t.Errorf("destroyCommand(%q, %v) = %v; want %v", tc.args, tc.env, got, tc.want)
		}
	}
}

func TestServesDestroy_OnlyAsTerraformsChild(t *testing.T) {
	parent := func() ([]string, error) { return []string{"terraform", "destroy"}, nil }
	cookie := func(k string) string {
		if k == pluginCookieEnv {
			return "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2"
		}
		return ""
	}
	if !servesDestroy(cookie, parent) {
		t.Error("terraform destroy's child does not serve a destroy")
	}
	if servesDestroy(func(string) string { return "" }, parent) {
		t.Error("a process without terraform's plugin cookie (not its child) serves a destroy")
	}
	if servesDestroy(cookie, func() ([]string, error) { return nil, errors.New("no procfs") }) {
		t.Error("a parent command line that cannot be read counts as a destroy")
	}
}

// While the provider serves a destroy, a plan-time check that fails (here the catalog's
// refusal of a VM size) answers with a warning and a plan, where a normal plan fails.
func TestDestroyServerTurnsPlanErrorsIntoWarnings(t *testing.T) {
	ctx := context.Background()
	srv, err := NewProtocol6Server("test")()
	if err != nil {
		t.Fatal(err)
	}
	f := srv.(*protocolServer).cluster
	str := func(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }
	num := func(n int64) tftypes.Value { return tftypes.NewValue(tftypes.Number, new(big.Float).SetInt64(n)) }
	config := clusterObject(t, f, map[string]tftypes.Value{
		"name": str("cpu"), "workspace_id": str("/workspaces/lab"), "vm_size": str("Standard_XY9_v9"),
		"scale_settings": tftypes.NewValue(f.stateType.AttributeTypes["scale_settings"], map[string]tftypes.Value{
			"min_node_count": num(0), "max_node_count": num(1),
			"scale_down_nodes_after_idle_duration": tftypes.NewValue(tftypes.String, nil),
		}),
	})
	req := &tfprotov6.PlanResourceChangeRequest{
		TypeName:         clusterTypeName,
		PriorState:       dynamic(t, f.stateType, tftypes.NewValue(f.stateType, nil)),
		ProposedNewState: dynamic(t, f.stateType, config),
		Config:           dynamic(t, f.stateType, config),
	}
	severities := func(diags []*tfprotov6.Diagnostic) (errs, warns []string) {
		for _, d := range diags {
			if d.Severity == tfprotov6.DiagnosticSeverityError {
				errs = append(errs, d.Summary)
			} else {
				warns = append(warns, d.Summary)
			}
		}
		return errs, warns
	}

	normal, err := srv.PlanResourceChange(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if errs, _ := severities(normal.Diagnostics); !slices.Contains(errs, "Invalid VM Size") {
		t.Fatalf("a normal plan's errors %v lack Invalid VM Size", errs)
	}
	destroying, err := newDestroyServer(srv).PlanResourceChange(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	errs, warns := severities(destroying.Diagnostics)
	if len(errs) != 0 || !slices.Contains(warns, "Invalid VM Size") {
		t.Fatalf("while destroying: errors %v, warnings %v; want Invalid VM Size as a warning only", errs, warns)
	}
	if destroying.PlannedState == nil {
		t.Fatal("while destroying: no planned state")
	}
	if _, err := destroying.PlannedState.Unmarshal(f.stateType); err != nil {
		t.Fatalf("while destroying: planned state: %v", err)
	}
}

// planAnswer is a protocol server whose plans answer with diags and no planned state.
type planAnswer struct {
	tfprotov6.ProviderServer
	diags []*tfprotov6.Diagnostic
}

func (p planAnswer) PlanResourceChange(context.Context, *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	var out []*tfprotov6.Diagnostic
	for _, d := range p.diags {
		c := *d
		out = append(out, &c)
	}
	return &tfprotov6.PlanResourceChangeResponse{Diagnostics: out}, nil
}

// While the provider serves a destroy, only the engine-dependent checks (quota, location,
// idle minimum, catalog) stand down; any other error still fails the plan.
func TestDestroyServerSetsAsideOnlyEngineChecks(t *testing.T) {
	ctx := context.Background()
	diag := func(summary string) *tfprotov6.Diagnostic {
		return &tfprotov6.Diagnostic{Severity: tfprotov6.DiagnosticSeverityError, Summary: summary}
	}
	proposed := &tfprotov6.DynamicValue{JSON: []byte(`{}`)}
	req := &tfprotov6.PlanResourceChangeRequest{ProposedNewState: proposed}
	for summary := range engineCheckSummaries {
		resp, err := newDestroyServer(planAnswer{diags: []*tfprotov6.Diagnostic{diag(summary)}}).PlanResourceChange(ctx, req)
		if err != nil || hasError(resp.Diagnostics) || resp.PlannedState != proposed {
			t.Errorf("%s while destroying: %v, %+v; want a warning and the proposed state", summary, err, resp)
		}
	}
	both := planAnswer{diags: []*tfprotov6.Diagnostic{diag(summaryQuotaExceeded), diag("Invalid Attribute Value")}}
	resp, err := newDestroyServer(both).PlanResourceChange(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var errs, warns []string
	for _, d := range resp.Diagnostics {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			errs = append(errs, d.Summary)
		} else {
			warns = append(warns, d.Summary)
		}
	}
	if !slices.Equal(errs, []string{"Invalid Attribute Value"}) || !slices.Equal(warns, []string{summaryQuotaExceeded}) || resp.PlannedState != nil {
		t.Fatalf("errors %v, warnings %v, planned %v; want the other error kept, the quota a warning, no plan", errs, warns, resp.PlannedState)
	}
}
