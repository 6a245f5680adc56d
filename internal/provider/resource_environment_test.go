package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
)

const testAccEnvironmentAddr = "mlcompute_environment.test"

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// testAccEnvironmentConfig is the provider, a workspace "envs" and one environment with
// the given body (name and workspace_id included).
func testAccEnvironmentConfig(endpoint, body string) string {
	return testAccWorkspaceConfig(endpoint, `name = "envs"`) + `
resource "mlcompute_environment" "test" {
  name         = "train"
  workspace_id = mlcompute_workspace.test.id
` + body + "\n}\n"
}

func envValue(p tfjsonpath.Path, check knownvalue.Check) statecheck.StateCheck {
	return statecheck.ExpectKnownValue(testAccEnvironmentAddr, p, check)
}

// engineEnvironmentHash checks the engine holds the environment with the state's hash.
func engineEnvironmentHash(c *client.Client) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		env, err := c.GetEnvironment(context.Background(), "envs", "train")
		if err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		if got := s.RootModule().Resources[testAccEnvironmentAddr].Primary.Attributes["content_hash"]; got != env.ContentHash {
			return fmt.Errorf("state content_hash %s; engine %s", got, env.ContentHash)
		}
		return nil
	}
}

func TestAccEnvironment_PythonUpdateInPlaceAndImport(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	hash := statecheck.CompareValue(compare.ValuesDiffer())
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccEnvironmentConfig(e.Endpoint, `
  python = {
    requirements = ["mlctest==0.1"]
    find_links   = ["/srv/wheels"]
  }
`),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccEnvironmentAddr, plancheck.ResourceActionCreate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				envValue(tfjsonpath.New("id"), knownvalue.StringExact("/workspaces/envs/environments/train")),
				envValue(tfjsonpath.New("python").AtMapKey("python"), knownvalue.StringExact("python3")),
				envValue(tfjsonpath.New("python").AtMapKey("index_url"), knownvalue.StringExact("")),
				envValue(tfjsonpath.New("python").AtMapKey("requirements"), knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("mlctest==0.1")})),
				envValue(tfjsonpath.New("user_managed"), knownvalue.Null()),
				envValue(tfjsonpath.New("content_hash"), knownvalue.StringRegexp(hex64)),
				envValue(tfjsonpath.New("created_on"), knownvalue.StringExact("2026-01-05T09:00:00Z")),
				hash.AddStateValue(testAccEnvironmentAddr, tfjsonpath.New("content_hash")),
			},
			Check: engineEnvironmentHash(c),
		}, {
			Config: testAccEnvironmentConfig(e.Endpoint, `
  python = {
    requirements = ["mlctest==0.2"]
    find_links   = ["/srv/wheels"]
  }
`),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccEnvironmentAddr, plancheck.ResourceActionUpdate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				hash.AddStateValue(testAccEnvironmentAddr, tfjsonpath.New("content_hash")),
				envValue(tfjsonpath.New("created_on"), knownvalue.StringExact("2026-01-05T09:00:00Z")),
			},
			Check: engineEnvironmentHash(c),
		}, {
			ResourceName:      testAccEnvironmentAddr,
			ImportState:       true,
			ImportStateId:     "/workspaces/envs/environments/train",
			ImportStateVerify: true,
		}},
	})
}

func TestAccEnvironment_UserManaged(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccEnvironmentConfig(e.Endpoint, `
  user_managed = { interpreter_path = "/opt/conda/envs/x/bin/python" }
`),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				envValue(tfjsonpath.New("user_managed").AtMapKey("interpreter_path"), knownvalue.StringExact("/opt/conda/envs/x/bin/python")),
				envValue(tfjsonpath.New("python"), knownvalue.Null()),
			},
		}, {
			ResourceName:      testAccEnvironmentAddr,
			ImportState:       true,
			ImportStateId:     "/workspaces/envs/environments/train",
			ImportStateVerify: true,
		}},
	})
}

func TestAccEnvironment_BadInputs(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	for name, tc := range map[string]struct{ body, want string }{
		"neither":          {``, "Invalid Attribute Combination"},
		"both":             {`python = {}` + "\n" + `user_managed = { interpreter_path = "/usr/bin/python3" }`, "Invalid Attribute Combination"},
		"requirement":      {`python = { requirements = ["numpy=1"] }`, "is not a requirement specifier"},
		"pip option":       {`python = { requirements = ["-r reqs.txt"] }`, "is not a requirement specifier"},
		"find_links":       {`python = { find_links = ["wheels"] }`, "must be an absolute directory"},
		"index_url":        {`python = { index_url = "ftp://x" }`, "must be an http:// or https:// URL"},
		"python":           {`python = { python = "python3 -u" }`, "must be a command name"},
		"interpreter_path": {`user_managed = { interpreter_path = "python3" }`, "must be an absolute path"},
	} {
		t.Run(name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:      testAccEnvironmentConfig(e.Endpoint, tc.body),
					PlanOnly:    true,
					ExpectError: expectError(tc.want),
				}},
			})
		})
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      testAccProviderConfig(e.Endpoint) + `resource "mlcompute_environment" "test" {` + "\n" + `name = "-bad"` + "\n" + `workspace_id = "/workspaces/envs"` + "\n" + `python = {}` + "\n}\n",
			PlanOnly:    true,
			ExpectError: expectError("Invalid Environment Name"),
		}},
	})
}
