package provider

// Helpers of the attached compute tests that the Kubernetes ones share; they need no Unix
// system, unlike resource_attached_compute_test.go, which runs sshd.

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
)

const testAccAttachedAddr = "mlcompute_attached_compute.test"

// testAccAttachedConfig is the provider block, a workspace "lab" and attached computes
// with the given bodies, named test, test2, ...
func testAccAttachedConfig(endpoint string, bodies ...string) string {
	out := testAccWorkspaceConfig(endpoint, `name = "lab"`)
	for i, body := range bodies {
		label := "test"
		if i > 0 {
			label = fmt.Sprintf("test%d", i+1)
		}
		out += fmt.Sprintf("resource \"mlcompute_attached_compute\" %q {\n  workspace_id = mlcompute_workspace.test.id\n%s\n}\n", label, body)
	}
	return out
}

func attachedValue(attr string, check knownvalue.Check) statecheck.StateCheck {
	return statecheck.ExpectKnownValue(testAccAttachedAddr, attrPath(attr), check)
}

// positive checks a number above zero.
var positive = knownvalue.Float64Func(func(v float64) error {
	if v <= 0 {
		return fmt.Errorf("%v is not above 0", v)
	}
	return nil
})

// waitJob waits until the job has the status, or fails when it ends otherwise. The wait is
// bounded only so that a broken rule fails instead of hanging.
func waitJob(c *client.Client, id, status string) error {
	var got *api.Job
	var err error
	for range 3000 {
		if got, err = c.GetJob(context.Background(), "lab", id); err == nil && got.Status == status {
			return nil
		}
		if err == nil && api.Terminal(got.Status) {
			return fmt.Errorf("job %s ended %s (%s), want %s", id, got.Status, got.Error, status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("job %s never reached %s (last: %+v, %v)", id, status, got, err)
}

// testAccAttachedDetached checks that the engine no longer holds the attached compute.
func testAccAttachedDetached(c *client.Client, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		_, err := c.GetCompute(context.Background(), "lab", name)
		if !api.IsNotFound(err) {
			return fmt.Errorf("attached compute %s still exists after destroy (%v)", name, err)
		}
		return nil
	}
}
