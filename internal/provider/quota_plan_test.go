package provider

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
)

// quotaEndpointConfig is a workspace "lab" with a quota of 10 vCPUs of standardDSv2Family,
// an endpoint "churn" whose deployment blue scales from 0 to maxInstances instances of
// Standard_DS2_v2 (2 vCPUs), and, when clusterNodes > 0, a cluster "cpu" of that many
// Standard_DS3_v2 nodes (4 vCPUs, the same family).
func quotaEndpointConfig(t *testing.T, endpoint string, maxInstances, clusterNodes int) string {
	config := testAccEndpointConfig(endpoint, deployments(testAccDeployment(t, "blue", "v1",
		fmt.Sprintf(`scale_settings = { type = "target_utilization", min_instances = 0, max_instances = %d }`, maxInstances)))+
		"  traffic = { blue = 100 }\n")
	config = strings.Replace(config, `name = "lab"`, "name = \"lab\"\n  quotas = { standardDSv2Family = 10 }", 1)
	if clusterNodes > 0 {
		config += fmt.Sprintf(`
resource "mlcompute_compute_cluster" "test" {
  workspace_id   = mlcompute_workspace.test.id
  name           = "cpu"
  vm_size        = "Standard_DS3_v2"
  scale_settings = { max_node_count = %d }
}
`, clusterNodes)
	}
	return config
}

// The workspace's quota holds an endpoint's max_instances (DESIGN 4), at plan time: raising
// max_instances past the quota fails the plan on that attribute, and a cluster planned after
// the endpoint counts what the endpoint holds.
func TestAccOnlineEndpoint_QuotaCheckedAtPlan(t *testing.T) {
	t.Parallel()
	e, c := testAccServingEngine(t)
	rec := &diagRecorder{}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: recordingFactories(rec),
		CheckDestroy:             testAccEndpointDestroyed(c),
		Steps: []resource.TestStep{{
			Config:            quotaEndpointConfig(t, e.Endpoint, 2, 0),
			ConfigStateChecks: []statecheck.StateCheck{endpointValue("deployments.blue.scale_settings.max_instances", knownvalue.Int64Exact(2))},
		}, {
			// 6 x 2 vCPUs in a quota of 10.
			Config:   quotaEndpointConfig(t, e.Endpoint, 6, 0),
			PlanOnly: true,
			ExpectError: expectError("Workspace Quota Exceeded", `Deployment "blue": max_instances = 6 of Standard_DS2_v2 needs 12 vCPUs of family standardDSv2Family`,
				`workspace "lab" has 10 of its 10 left`, "lower max_instances to 5", "quotas = { standardDSv2Family = 12 }"),
		}, {
			// A cluster of 2 x 4 vCPUs next to the endpoint's 2 x 2.
			Config:   quotaEndpointConfig(t, e.Endpoint, 2, 2),
			PlanOnly: true,
			ExpectError: expectError("Workspace Quota Exceeded", `Compute "cpu" needs 8 vCPUs of standardDSv2Family`,
				`has 6 of its 10 left (already used by endpoint churn deployment blue (4 vCPUs))`, "lower scale_settings.max_node_count to 1"),
		}, {
			Config: quotaEndpointConfig(t, e.Endpoint, 2, 1),
		}},
	})
	rec.expectPaths(t, "Workspace Quota Exceeded", `deployments["blue"].scale_settings.max_instances`, "scale_settings.max_node_count")
}
