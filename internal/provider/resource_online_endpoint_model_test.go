package provider

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// expectModel checks that a scoring request is answered 200 by deployment blue with the
// model file it read through AZUREML_MODEL_DIR.
func expectModel(model string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		sc, err := scoringFrom(s)
		if err != nil {
			return err
		}
		status, reply, err := score(sc.uri, sc.primary, "")
		if err != nil {
			return err
		}
		if status != http.StatusOK || reply.Deployment != "blue" || reply.Model != model {
			return fmt.Errorf("POST %s = %d %+v; want 200 from blue with model %q", sc.uri, status, reply, model)
		}
		return nil
	}
}

// A deployment's model_path is a local directory each instance reads through
// AZUREML_MODEL_DIR: the plan hashes it into model_digest, a new model is a rollout that
// serves it, and import reads model_path and model_digest back.
func TestAccOnlineEndpoint_Model(t *testing.T) {
	t.Parallel()
	e, c := testAccServingEngine(t)
	modelDir := t.TempDir()
	writeModel := func(v string) {
		if err := os.WriteFile(filepath.Join(modelDir, "MODEL"), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeModel("model-1")
	config := testAccEndpointConfig(e.Endpoint, deployments(testAccDeployment(t, "blue", "v1",
		fmt.Sprintf("model_path = %q", modelDir)))+"  traffic = { blue = 100 }\n")
	var firstDigest string
	digestOf := func(s *terraform.State) string {
		return s.RootModule().Resources[testAccEndpointAddr].Primary.Attributes["deployments.blue.model_digest"]
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccEndpointDestroyed(c),
		Steps: []resource.TestStep{{
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				endpointValue("deployments.blue.model_path", knownvalue.StringExact(modelDir)),
				endpointValue("deployments.blue.model_digest", knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{64}$`))),
			},
			Check: resource.ComposeAggregateTestCheckFunc(
				expectModel("model-1"),
				func(s *terraform.State) error { firstDigest = digestOf(s); return nil },
			),
		}, {
			// The same configuration, but a new model: the plan shows a rollout.
			PreConfig:        func() { writeModel("model-2") },
			Config:           config,
			ConfigPlanChecks: updatedInPlace(testAccEndpointAddr),
			Check: resource.ComposeAggregateTestCheckFunc(
				expectModel("model-2"),
				func(s *terraform.State) error {
					if now := digestOf(s); now == firstDigest {
						return fmt.Errorf("model_digest did not change with the model (%s)", now)
					}
					return nil
				},
				engineEndpoint(c, func(got *api.Endpoint) error {
					if g := got.Deployments["blue"].Generation; g < 2 {
						return fmt.Errorf("blue's generation is %d after a new model; want 2 or more", g)
					}
					return nil
				}),
			),
		}, {
			ResourceName:      testAccEndpointAddr,
			ImportState:       true,
			ImportStateId:     "/workspaces/lab/onlineEndpoints/churn",
			ImportStateVerify: true,
		}},
	})
}
