package provider

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
)

// Terraform places a diagnostic in the configuration only down to a top-level attribute
// (or nested block): for a nested attribute's path it shows the resource's header line.
// So these tests check the attribute path the provider sends, exactly, by recording the
// diagnostics of the provider server that terraform talks to, and the text terraform
// prints, which names the nested attribute as the configuration spells it.

// diagRecorder keeps every diagnostic the provider returned from validation and planning.
type diagRecorder struct {
	mu    sync.Mutex
	diags []*tfprotov6.Diagnostic
}

func (r *diagRecorder) add(diags []*tfprotov6.Diagnostic) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.diags = append(r.diags, diags...)
}

// recordingServer is the provider's protocol server with its diagnostics recorded.
type recordingServer struct {
	tfprotov6.ProviderServer
	rec *diagRecorder
}

func (s recordingServer) ValidateResourceConfig(ctx context.Context, req *tfprotov6.ValidateResourceConfigRequest) (*tfprotov6.ValidateResourceConfigResponse, error) {
	resp, err := s.ProviderServer.ValidateResourceConfig(ctx, req)
	if resp != nil {
		s.rec.add(resp.Diagnostics)
	}
	return resp, err
}

func (s recordingServer) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	resp, err := s.ProviderServer.PlanResourceChange(ctx, req)
	if resp != nil {
		s.rec.add(resp.Diagnostics)
	}
	return resp, err
}

func recordingFactories(rec *diagRecorder) map[string]func() (tfprotov6.ProviderServer, error) {
	return map[string]func() (tfprotov6.ProviderServer, error){
		"mlcompute": func() (tfprotov6.ProviderServer, error) {
			srv, err := NewProtocol6Server("test")()
			return recordingServer{ProviderServer: srv, rec: rec}, err
		},
	}
}

// hclPath writes an attribute path as the configuration spells it: schedules[1].cron.
func hclPath(p *tftypes.AttributePath) string {
	if p == nil {
		return ""
	}
	var b strings.Builder
	for _, step := range p.Steps() {
		switch s := step.(type) {
		case tftypes.AttributeName:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(string(s))
		case tftypes.ElementKeyInt:
			b.WriteString("[" + strconv.FormatInt(int64(s), 10) + "]")
		case tftypes.ElementKeyString:
			b.WriteString(fmt.Sprintf("[%q]", string(s)))
		default:
			b.WriteString("[?]")
		}
	}
	return b.String()
}

// expectPaths checks that the errors with this summary were reported on exactly these
// attribute paths, each once.
func (r *diagRecorder) expectPaths(t *testing.T, summary string, want ...string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]int{}
	var got []string
	for _, d := range r.diags {
		if d.Severity != tfprotov6.DiagnosticSeverityError || d.Summary != summary {
			continue
		}
		p := hclPath(d.Attribute)
		seen[p]++
		if seen[p] == 1 {
			got = append(got, p)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("%q errors on %v; want on %v", summary, got, want)
	}
}

// count is how many recorded diagnostics have this summary.
func (r *diagRecorder) count(summary string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, d := range r.diags {
		if d.Summary == summary {
			n++
		}
	}
	return n
}

// A bad cron and a bad time zone in the second schedule: each error is on its own nested
// attribute, and the text says schedules[1].cron, as the docs write it.
func TestAccComputeInstance_ScheduleErrorPaths(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	rec := &diagRecorder{}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: recordingFactories(rec),
		Steps: []resource.TestStep{{
			Config: testAccDevInstance(e.Endpoint, "Standard_DS3_v2", `  schedules = [
    { action = "Start", cron = "0 8 * * 1-5" },
    {
      action    = "Stop"
      cron      = "0 25 * * *"
      time_zone = "Mars/Olympus"
    },
  ]`),
			PlanOnly: true,
			ExpectError: expectError("Invalid Schedule",
				`schedules[1].`, `is not a valid`),
		}},
	})
	rec.expectPaths(t, "Invalid Schedule Cron Expression", "schedules[1].cron")
	rec.expectPaths(t, "Invalid Schedule Time Zone", "schedules[1].time_zone")
	for _, d := range rec.diags {
		if strings.Contains(d.Detail, "schedules.1.") {
			t.Fatalf("%s: detail spells the path with a dot index: %s", d.Summary, d.Detail)
		}
	}
}

// min_node_count above max_node_count is reported on scale_settings.min_node_count.
func TestAccComputeCluster_MinAboveMaxErrorPath(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	rec := &diagRecorder{}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: recordingFactories(rec),
		Steps: []resource.TestStep{{
			Config: testAccCPUCluster(e.Endpoint, `{
    min_node_count = 3
    max_node_count = 2
  }`, ""),
			PlanOnly:    true,
			ExpectError: expectError("Invalid Scale Settings", "min_node_count (3) must not be greater than max_node_count (2)"),
		}},
	})
	rec.expectPaths(t, "Invalid Scale Settings", "scale_settings.min_node_count")
}

// Both password and private_key: one error, on virtual_machine, naming both paths.
func TestAccAttachedCompute_BothCredentialsOneError(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	rec := &diagRecorder{}
	config := testAccAttachedConfig(e.Endpoint, `  name = "box"
  virtual_machine = {
    address     = "10.0.0.5"
    username    = "ml"
    password    = "pw"
    private_key = "key"
  }`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: recordingFactories(rec),
		Steps: []resource.TestStep{{
			Config:   config,
			PlanOnly: true,
			ExpectError: expectError("Conflicting Credentials",
				"virtual_machine.password and virtual_machine.private_key are both set", "Remove one"),
		}, {
			Config: testAccAttachedConfig(e.Endpoint, `  name = "box"
  virtual_machine = {
    address  = "10.0.0.5"
    username = "ml"
  }`),
			PlanOnly:    true,
			ExpectError: expectError("Missing Credentials", "Neither virtual_machine.password nor virtual_machine.private_key is set"),
		}},
	})
	rec.expectPaths(t, "Conflicting Credentials", "virtual_machine")
	rec.expectPaths(t, "Missing Credentials", "virtual_machine")
	if n := rec.count("Invalid Attribute Combination"); n != 0 {
		t.Fatalf("the framework's ExactlyOneOf error still comes, %d times", n)
	}
	// One error per validation, not one per attribute: terraform validates the
	// configuration before it plans, so each validation response holds it once.
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, d := range rec.diags {
		if d.Summary == "Conflicting Credentials" && !strings.Contains(d.Detail, "virtual_machine.private_key") {
			t.Fatalf("detail does not name both paths: %s", d.Detail)
		}
	}
}

// The quota check at plan time, for a workspace that already exists: raising max_node_count
// past the quota fails the plan on scale_settings.max_node_count with the fix in the text;
// raising the quota in the same plan passes; a size of which not one node fits fails on
// vm_size; and a plan that changes nothing the quota depends on asks the engine nothing.
func TestAccComputeCluster_QuotaCheckedAtPlan(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	rec := &diagRecorder{}
	checkCalls := func() float64 { return apiCalls(t, e, "POST", "/v1/workspaces/{workspace}/quota:check") }
	var before float64
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: recordingFactories(rec),
		CheckDestroy:             testAccClusterDestroyed(e, c, "lab", "gpu"),
		Steps: []resource.TestStep{{
			Config: gpuConfig(e.Endpoint, 12, "Standard_NC6s_v3", 2, ""),
		}, {
			PreConfig: func() { before = checkCalls() },
			// Only the description changes: nothing the quota depends on.
			Config:           gpuConfig(e.Endpoint, 12, "Standard_NC6s_v3", 2, "renamed"),
			ConfigPlanChecks: updatedInPlace(testAccClusterAddr),
			Check: func(*terraform.State) error {
				if n := checkCalls() - before; n != 0 {
					return fmt.Errorf("%v quota checks for a plan that changes no quota input; want 0", n)
				}
				return nil
			},
		}, {
			Config:   gpuConfig(e.Endpoint, 12, "Standard_NC6s_v3", 3, "renamed"),
			PlanOnly: true,
			ExpectError: expectError("Workspace Quota Exceeded", `Compute "gpu" needs 18 vCPUs of standardNCSv3Family`,
				`workspace "lab" has 12 of its 12 left`, "lower scale_settings.max_node_count to 2",
				"quotas = { standardNCSv3Family = 18 }"),
		}, {
			// The quota and max_node_count rise together: the plan checks against the new quota.
			Config:            gpuConfig(e.Endpoint, 18, "Standard_NC6s_v3", 3, "renamed"),
			ConfigStateChecks: []statecheck.StateCheck{clusterValue("scale_settings.max_node_count", knownvalue.Int64Exact(3))},
			Check: func(*terraform.State) error {
				if checkCalls() == before {
					return fmt.Errorf("no quota check for plans that raise max_node_count")
				}
				return nil
			},
		}, {
			// 24 vCPUs a node, 18 in the quota: not one node fits.
			Config:   gpuConfig(e.Endpoint, 18, "Standard_NC24s_v3", 1, "renamed"),
			PlanOnly: true,
			ExpectError: expectError("Workspace Quota Exceeded", "less than one node of Standard_NC24s_v3 (24 vCPUs)",
				"quotas = { standardNCSv3Family = 24 }", "or choose a vm_size of another family"),
		}},
	})
	rec.expectPaths(t, "Workspace Quota Exceeded", "scale_settings.max_node_count", "vm_size")
}

// gpuConfig is a workspace "lab" with a standardNCSv3Family quota and a cluster "gpu" in it.
func gpuConfig(endpoint string, quota int, size string, maxNodes int, description string) string {
	return testAccClusterConfig(endpoint, fmt.Sprintf("quotas = { standardNCSv3Family = %d }", quota), fmt.Sprintf(`
  name           = "gpu"
  vm_size        = %q
  description    = %q
  scale_settings = { max_node_count = %d }
`, size, description, maxNodes))
}

// apiCalls is how many calls of an API route the test engine has served (its metrics).
func apiCalls(t *testing.T, e *enginetest.Engine, method, route string) float64 {
	t.Helper()
	families, err := e.Metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "mlcompute_api_request_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["method"] == method && labels["route"] == route {
				n += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return n
}
