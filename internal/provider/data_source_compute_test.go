package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
)

// The data source's values are checked in TestAccComputeCluster_NoDriftAfterScaling, which
// scales a cluster; here are its errors.
func TestAccComputeDataSource_Errors(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	read := func(workspaceID, name string) string {
		return testAccWorkspaceConfig(e.Endpoint, `name = "lab"`) + `
data "mlcompute_compute" "test" {
  workspace_id = ` + workspaceID + `
  name         = "` + name + `"
}
`
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      read(`"lab"`, "cpu"),
			ExpectError: expectError("Invalid Workspace ID", `ID "lab" is not of the form /workspaces/{workspace}`),
		}, {
			Config:      read("mlcompute_workspace.test.id", "nothere"),
			ExpectError: expectError("Compute Not Found", `read compute "nothere" in workspace "lab"`),
		}},
	})
}
