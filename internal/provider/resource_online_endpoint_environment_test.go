package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
)

// envScorerPy serves as the test scorer does, from a python that needs its environment:
// "version" is the installed mlctest's, "code" the python that PATH finds first.
var envScorerPy = enginetest.PythonScorer("mlctest", `{"deployment": "blue", "version": mlctest.VERSION, "code": shutil.which("python")}`)

// testAccEndpointEnvironmentConfig is a workspace "lab" with environments "v1" and "v2"
// (mlctest 0.1 and 0.2 from a local wheel directory) and an endpoint whose deployment runs
// in the named one.
func testAccEndpointEnvironmentConfig(endpoint, wheels, code, env string) string {
	return testAccEndpointConfig(endpoint, fmt.Sprintf(`  deployments = {
    blue = {
      instance_type   = "Standard_DS2_v2"
      code_path       = %q
      command         = ["python", "serve.py"]
      environment_id  = mlcompute_environment.%s.id
      # The instance builds its environment before it listens: up to 180 checks (one a second)
      # leave that build time on a loaded machine; it is ready at its first good check.
      readiness_probe = { initial_delay = "PT0S", period = "PT1S", failure_threshold = 180 }
    }
  }
  traffic = { blue = 100 }
`, code, env)) + fmt.Sprintf(`
resource "mlcompute_environment" "v1" {
  name         = "v1"
  workspace_id = mlcompute_workspace.test.id
  python       = { requirements = ["mlctest==0.1"], find_links = [%[1]q] }
}

resource "mlcompute_environment" "v2" {
  name         = "v2"
  workspace_id = mlcompute_workspace.test.id
  python       = { requirements = ["mlctest==0.2"], find_links = [%[1]q] }
}
`, wheels)
}

// expectServedFrom checks that the deployment answers with mlctest's version and with
// python found first on PATH in the environment's build.
func expectServedFrom(cacheDir, version string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		sc, err := scoringFrom(s)
		if err != nil {
			return err
		}
		code, reply, err := score(sc.uri, sc.primary, "")
		if err != nil || code != 200 {
			return fmt.Errorf("score: %d, %v", code, err)
		}
		if reply.Version != version || !regexp.MustCompile(`^`+regexp.QuoteMeta(cacheDir)+`/[0-9a-f]{16}/bin/python$`).MatchString(reply.Code) {
			return fmt.Errorf("served by mlctest %q with python %q; want %q from a build in %s", reply.Version, reply.Code, version, cacheDir)
		}
		return nil
	}
}

// A deployment runs in its environment: created with environment_id, moved to another
// environment in place (a rollout), imported, and refused an environment of another
// workspace at plan time.
func TestAccOnlineEndpoint_Environment(t *testing.T) {
	t.Parallel()
	e, _ := testAccServingEngine(t)
	wheels, code := t.TempDir(), t.TempDir()
	for _, v := range []string{"0.1", "0.2"} {
		if _, err := enginetest.MakeWheel(wheels, "mlctest", v, fmt.Sprintf("VERSION = %q\n", v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(code, "serve.py"), []byte(envScorerPy), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(e.DataDir, "envs")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccEndpointEnvironmentConfig(e.Endpoint, wheels, code, "v1"),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				endpointValue("deployments.blue.environment_id", knownvalue.StringExact("/workspaces/lab/environments/v1")),
			},
			Check: expectServedFrom(cache, "0.1"),
		}, {
			Config: testAccEndpointEnvironmentConfig(e.Endpoint, wheels, code, "v2"),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccEndpointAddr, plancheck.ResourceActionUpdate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				endpointValue("deployments.blue.environment_id", knownvalue.StringExact("/workspaces/lab/environments/v2")),
				endpointValue("provisioning_state", knownvalue.StringExact(api.ProvisioningSucceeded)),
			},
			Check: expectServedFrom(cache, "0.2"),
		}, {
			ResourceName:      testAccEndpointAddr,
			ImportState:       true,
			ImportStateId:     "/workspaces/lab/onlineEndpoints/churn",
			ImportStateVerify: true,
		}},
	})
}
