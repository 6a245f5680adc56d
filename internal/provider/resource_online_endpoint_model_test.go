package provider

import (
	"context"
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

// A deployment's model_path can be a registered job output: the plan takes its manifest
// digest as model_digest, instances read its files through AZUREML_MODEL_DIR, and an
// unknown job or output, or a job that failed, is a plan error naming it.
func TestAccOnlineEndpoint_ModelFromJob(t *testing.T) {
	t.Parallel()
	e, c := testAccServingEngine(t)
	cluster := `
resource "mlcompute_compute_cluster" "cpu" {
  name           = "cpu"
  workspace_id   = mlcompute_workspace.test.id
  vm_size        = "Standard_DS3_v2"
  scale_settings = { max_node_count = 1 }
}
`
	config := func(modelPath string) string {
		extra := ""
		if modelPath != "" {
			extra = fmt.Sprintf("model_path = %q", modelPath)
		}
		return testAccEndpointConfig(e.Endpoint, deployments(testAccDeployment(t, "blue", "v1", extra))+
			"  traffic = { blue = 100 }\n") + cluster
	}
	submit := func(name, script, status string) error {
		j, err := c.SubmitJob(context.Background(), "lab", api.JobSpec{Name: name, Compute: "cpu",
			Command: []string{"/bin/sh", "-c", script}, Outputs: map[string]api.JobOutput{"model": {}}})
		if err != nil {
			return err
		}
		return waitJob(c, j.ID, status)
	}
	planError := func(modelPath string, phrases ...string) resource.TestStep {
		return resource.TestStep{Config: config(modelPath), PlanOnly: true, ExpectError: expectError(phrases...)}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccEndpointDestroyed(c),
		Steps: []resource.TestStep{{
			Config: config(""),
			Check: func(*terraform.State) error {
				if err := submit("train", "echo model-from-job > ${{outputs.model}}/MODEL", api.JobCompleted); err != nil {
					return err
				}
				return submit("broken", "exit 3", api.JobFailed)
			},
		}, {
			Config:           config("azureml://jobs/train/outputs/model"),
			ConfigPlanChecks: updatedInPlace(testAccEndpointAddr),
			ConfigStateChecks: []statecheck.StateCheck{
				endpointValue("deployments.blue.model_digest", knownvalue.StringRegexp(regexp.MustCompile(`^sha256:[0-9a-f]{64}$`))),
			},
			Check: resource.ComposeAggregateTestCheckFunc(
				expectModel("model-from-job"),
				engineEndpoint(c, func(got *api.Endpoint) error {
					j, err := c.GetJob(context.Background(), "lab", "train")
					if err != nil {
						return err
					}
					if d, want := got.Deployments["blue"].ModelDigest, j.Outputs["model"].Digest; d != want {
						return fmt.Errorf("engine's model digest %q; want the output's %q", d, want)
					}
					return nil
				}),
			),
		}, {
			ResourceName:      testAccEndpointAddr,
			ImportState:       true,
			ImportStateId:     "/workspaces/lab/onlineEndpoints/churn",
			ImportStateVerify: true,
		},
			planError("azureml://jobs/nope/outputs/model", "Cannot Serve Model Path", `job "nope" not found in workspace "lab"`),
			planError("azureml://jobs/train/outputs/weights", "Cannot Serve Model Path", `job "train" has no output "weights"`, "its outputs: model"),
			planError("azureml://jobs/broken/outputs/model", "Cannot Serve Model Path", `job "broken" is Failed`),
			planError("azureml://jobs/train", "Invalid Model Path", "azureml://jobs/<job>/outputs/<output>"),
		},
	})
}
