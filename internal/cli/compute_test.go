package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
)

// compute report-activity reaches the engine's activity API for the instance it names, or
// for the one MLCOMPUTE_COMPUTE names (the engine sets it in sessions and setup scripts).
func TestReportActivityCommand(t *testing.T) {
	e := enginetest.Start(t, enginetest.Options{})
	c := e.Client(t, "")
	ctx := context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCompute(ctx, "lab", api.ComputeSpec{Name: "alice-dev", Type: api.TypeComputeInstance, VMSize: "Standard_DS3_v2", Instance: &api.InstanceSettings{}}); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCLI(e, "compute", "report-activity", "--workspace", "lab", "alice-dev")
	if err != nil || !strings.Contains(out, "activity reported on lab/alice-dev") {
		t.Fatalf("report-activity alice-dev: %v (%q, %q)", err, out, errOut)
	}
	t.Setenv("MLCOMPUTE_COMPUTE", "bob-dev")
	if _, _, err := runCLI(e, "compute", "report-activity", "--workspace", "lab"); err == nil || !strings.Contains(err.Error(), "bob-dev") {
		t.Fatalf("report-activity with MLCOMPUTE_COMPUTE=bob-dev (no such instance): %v; want a not-found error naming bob-dev", err)
	}
	t.Setenv("MLCOMPUTE_COMPUTE", "")
	if _, _, err := runCLI(e, "compute", "report-activity", "--workspace", "lab"); err == nil || !strings.Contains(err.Error(), "MLCOMPUTE_COMPUTE") {
		t.Fatalf("report-activity with no name: %v; want an error saying to name the instance", err)
	}
}
