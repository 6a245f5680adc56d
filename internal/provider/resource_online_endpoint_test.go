package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	fwresource "github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
)

const testAccEndpointAddr = "mlcompute_online_endpoint.test"

// testAccServingEngine starts an in-process engine whose nodes are real local processes
// (node agents run by this test binary) on the real clock, so that deployments really
// serve HTTP and probes really run.
func testAccServingEngine(t *testing.T) (*enginetest.Engine, *client.Client) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return testAccEngine(t, enginetest.Options{AgentArgv: []string{exe, "engine", "node-agent"}})
}

// testAccEndpointConfig is the provider block, a workspace "lab" and an endpoint "churn" in
// it with the given body.
func testAccEndpointConfig(endpoint, body string) string {
	return testAccWorkspaceConfig(endpoint, `name = "lab"`) + `
resource "mlcompute_online_endpoint" "test" {
  name         = "churn"
  workspace_id = mlcompute_workspace.test.id
` + body + "\n}\n"
}

// testAccDeployment is a deployment of the test scorer that answers as name and version,
// probed every second from the start, with extra attributes.
func testAccDeployment(t *testing.T, name, version, extra string) string {
	return fmt.Sprintf(`    %s = {
      instance_type         = "Standard_DS2_v2"
      command               = %s
      environment_variables = { SCORER_NAME = %q, SCORER_VERSION = %q }
      readiness_probe       = { initial_delay = "PT0S", period = "PT1S" }
      %s
    }
`, name, testScorerCommand(t), name, version, extra)
}

// deployments wraps deployment blocks into the deployments attribute.
func deployments(blocks ...string) string {
	return "  deployments = {\n" + strings.Join(blocks, "") + "  }\n"
}

func endpointValue(attr string, check knownvalue.Check) statecheck.StateCheck {
	return statecheck.ExpectKnownValue(testAccEndpointAddr, attrPath(attr), check)
}

// scoring is what a test needs to send scoring requests: the URI and keys in state.
type scoring struct {
	uri, primary, secondary string
}

func scoringFrom(s *terraform.State) (scoring, error) {
	rs, ok := s.RootModule().Resources[testAccEndpointAddr]
	if !ok {
		return scoring{}, fmt.Errorf("%s is not in state", testAccEndpointAddr)
	}
	a := rs.Primary.Attributes
	return scoring{uri: a["scoring_uri"], primary: a["primary_key"], secondary: a["secondary_key"]}, nil
}

// score sends one scoring request with the credential (none when empty), pinned to a
// deployment when pin is set, and returns the status and, for a 200, the scorer's reply.
func score(uri, credential, pin string) (int, scoreReply, error) {
	req, err := http.NewRequest(http.MethodPost, uri, bytes.NewReader([]byte(`{"data": [[1, 2, 3]]}`)))
	if err != nil {
		return 0, scoreReply{}, err
	}
	if credential != "" {
		req.Header.Set("Authorization", "Bearer "+credential)
	}
	if pin != "" {
		req.Header.Set("azureml-model-deployment", pin)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, scoreReply{}, err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var reply scoreReply
	if res.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &reply); err != nil {
			return res.StatusCode, reply, fmt.Errorf("scorer answered %q: %w", body, err)
		}
		if got := res.Header.Get("azureml-model-deployment"); got != reply.Deployment {
			return res.StatusCode, reply, fmt.Errorf("response names deployment %q; the scorer of %q served it", got, reply.Deployment)
		}
	}
	return res.StatusCode, reply, nil
}

// expectServed checks that a request with the primary key, pinned to pin (or not pinned
// when empty), is answered 200 by the given deployment, version and code.
func expectServed(pin, deployment, version, code string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		sc, err := scoringFrom(s)
		if err != nil {
			return err
		}
		status, reply, err := score(sc.uri, sc.primary, pin)
		if err != nil {
			return err
		}
		want := scoreReply{Deployment: deployment, Version: version, Code: code}
		if status != http.StatusOK || reply != want {
			return fmt.Errorf("POST %s (pin %q) = %d %+v; want 200 %+v", sc.uri, pin, status, reply, want)
		}
		return nil
	}
}

// expectStatus checks the status of a request with the given credential and pin.
func expectStatus(credential func(scoring) string, pin string, want int) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		sc, err := scoringFrom(s)
		if err != nil {
			return err
		}
		status, _, err := score(sc.uri, credential(sc), pin)
		if err != nil {
			return err
		}
		if status != want {
			return fmt.Errorf("POST %s with pin %q = %d; want %d", sc.uri, pin, status, want)
		}
		return nil
	}
}

func primaryKey(s scoring) string   { return s.primary }
func secondaryKey(s scoring) string { return s.secondary }
func noKey(scoring) string          { return "" }
func wrongKey(s scoring) string     { return s.primary + "x" }

// engineEndpoint checks the endpoint the engine holds.
func engineEndpoint(c *client.Client, check func(*api.Endpoint) error) resource.TestCheckFunc {
	return func(*terraform.State) error {
		got, err := c.GetEndpoint(context.Background(), "lab", "churn")
		if err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		return check(got)
	}
}

// testAccEndpointDestroyed checks that the engine no longer holds the endpoint.
func testAccEndpointDestroyed(c *client.Client) resource.TestCheckFunc {
	return func(*terraform.State) error {
		if _, err := c.GetEndpoint(context.Background(), "lab", "churn"); !api.IsNotFound(err) {
			return fmt.Errorf("endpoint lab/churn still exists after destroy (err %v)", err)
		}
		return nil
	}
}

// testProbeValue is a probe with the defaults but the test deployments' timing.
var testProbeValue = knownvalue.ObjectExact(map[string]knownvalue.Check{
	"path":              knownvalue.StringExact("/"),
	"initial_delay":     knownvalue.StringExact("PT0S"),
	"period":            knownvalue.StringExact("PT1S"),
	"timeout":           knownvalue.StringExact(api.DefaultProbeTimeout),
	"success_threshold": knownvalue.Int64Exact(api.DefaultProbeSuccessThreshold),
	"failure_threshold": knownvalue.Int64Exact(api.DefaultProbeFailureThreshold),
})

func TestAccOnlineEndpoint_Basic(t *testing.T) {
	t.Parallel()
	e, c := testAccServingEngine(t)
	config := testAccEndpointConfig(e.Endpoint, deployments(testAccDeployment(t, "blue", "v1", ""))+
		"  traffic = { blue = 100 }\n")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccEndpointDestroyed(c),
		Steps: []resource.TestStep{{
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccEndpointAddr, plancheck.ResourceActionCreate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				endpointValue("id", knownvalue.StringExact("/workspaces/lab/onlineEndpoints/churn")),
				endpointValue("auth_mode", knownvalue.StringExact(api.AuthModeKey)),
				endpointValue("scoring_uri", knownvalue.StringRegexp(regexp.MustCompile(`^http://127\.0\.0\.1:\d+/churn/score$`))),
				endpointValue("primary_key", knownvalue.StringRegexp(regexp.MustCompile(`^\S{32,}$`))),
				endpointValue("secondary_key", knownvalue.StringRegexp(regexp.MustCompile(`^\S{32,}$`))),
				statecheck.CompareValuePairs(testAccEndpointAddr, tfjsonpath.New("primary_key"),
					testAccEndpointAddr, tfjsonpath.New("secondary_key"), compare.ValuesDiffer()),
				endpointValue("provisioning_state", knownvalue.StringExact(api.ProvisioningSucceeded)),
				endpointValue("traffic", knownvalue.MapExact(map[string]knownvalue.Check{"blue": knownvalue.Int64Exact(100)})),
				endpointValue("mirror_traffic", emptyMap),
				endpointValue("tags", emptyMap),
				endpointValue("deployments.blue.instance_count", knownvalue.Int64Exact(1)),
				endpointValue("deployments.blue.code_path", knownvalue.Null()),
				endpointValue("deployments.blue.code_snapshot_id", knownvalue.Null()),
				endpointValue("deployments.blue.request_settings", knownvalue.ObjectExact(map[string]knownvalue.Check{
					"request_timeout_ms":                   knownvalue.Int64Exact(api.DefaultRequestTimeoutMS),
					"max_concurrent_requests_per_instance": knownvalue.Int64Exact(api.DefaultMaxConcurrentRequestsPerInstance),
					"max_queue_wait_ms":                    knownvalue.Int64Exact(api.DefaultMaxQueueWaitMS),
				})),
				endpointValue("deployments.blue.scale_settings", knownvalue.ObjectExact(map[string]knownvalue.Check{
					"type":                          knownvalue.StringExact(api.ScaleTypeDefault),
					"min_instances":                 knownvalue.Int64Exact(1),
					"max_instances":                 knownvalue.Int64Exact(1),
					"target_utilization_percentage": knownvalue.Int64Exact(70),
					"polling_interval":              knownvalue.StringExact("PT1S"),
					"scale_down_delay":              knownvalue.StringExact("PT5M"),
					"scale_to_zero_delay":           knownvalue.Null(),
				})),
				endpointValue("deployments.blue.readiness_probe", testProbeValue),
				endpointValue("deployments.blue.liveness_probe", knownvalue.ObjectExact(map[string]knownvalue.Check{
					"path":              knownvalue.StringExact(api.DefaultProbePath),
					"initial_delay":     knownvalue.StringExact(api.DefaultProbeInitialDelay),
					"period":            knownvalue.StringExact(api.DefaultProbePeriod),
					"timeout":           knownvalue.StringExact(api.DefaultProbeTimeout),
					"success_threshold": knownvalue.Int64Exact(api.DefaultProbeSuccessThreshold),
					"failure_threshold": knownvalue.Int64Exact(api.DefaultProbeFailureThreshold),
				})),
			},
			Check: resource.ComposeAggregateTestCheckFunc(
				expectServed("", "blue", "v1", ""),
				expectStatus(secondaryKey, "", http.StatusOK),
				expectStatus(noKey, "", http.StatusUnauthorized),
				expectStatus(wrongKey, "", http.StatusUnauthorized),
				engineEndpoint(c, func(got *api.Endpoint) error {
					if n := len(got.Deployments["blue"].Instances); n != 1 {
						return fmt.Errorf("blue has %d instances; want 1", n)
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

// With scale_settings.type = target_utilization the autoscaler decides the count and a
// configured instance_count is ignored (DESIGN 3; plan warns): the apply succeeds, the
// deployment runs min_instances, not instance_count, and plans stay empty, before and after
// an import.
func TestAccOnlineEndpoint_InstanceCountIgnoredWhenAutoscaled(t *testing.T) {
	t.Parallel()
	e, c := testAccServingEngine(t)
	config := testAccEndpointConfig(e.Endpoint, deployments(testAccDeployment(t, "blue", "v1", `instance_count = 2
      scale_settings = { type = "target_utilization", min_instances = 1, max_instances = 3 }`))+
		"  traffic = { blue = 100 }\n")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccEndpointDestroyed(c),
		Steps: []resource.TestStep{{
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				endpointValue("deployments.blue.instance_count", knownvalue.Int64Exact(2)),
				endpointValue("deployments.blue.scale_settings.type", knownvalue.StringExact(api.ScaleTypeTargetUtilization)),
				endpointValue("provisioning_state", knownvalue.StringExact(api.ProvisioningSucceeded)),
			},
			Check: resource.ComposeAggregateTestCheckFunc(
				expectServed("", "blue", "v1", ""),
				engineEndpoint(c, func(got *api.Endpoint) error {
					if n := len(got.Deployments["blue"].Instances); n != 1 {
						return fmt.Errorf("blue has %d instances; want min_instances, 1, not instance_count", n)
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

// Traffic moves, deployments come and go, and mirroring starts and stops, all in place.
func TestAccOnlineEndpoint_TrafficAndDeployments(t *testing.T) {
	t.Parallel()
	e, c := testAccServingEngine(t)
	blue, green := testAccDeployment(t, "blue", "v1", ""), testAccDeployment(t, "green", "v2", "")
	config := func(body string) string { return testAccEndpointConfig(e.Endpoint, body) }
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccEndpointDestroyed(c),
		Steps: []resource.TestStep{{
			Config: config(deployments(blue) + "  traffic = { blue = 100 }\n"),
			Check:  expectServed("", "blue", "v1", ""),
		}, {
			// A new deployment, and 20% of live traffic for it.
			Config:           config(deployments(blue, green) + "  traffic = { blue = 80, green = 20 }\n"),
			ConfigPlanChecks: updatedInPlace(testAccEndpointAddr),
			ConfigStateChecks: []statecheck.StateCheck{
				endpointValue("traffic", knownvalue.MapExact(map[string]knownvalue.Check{
					"blue": knownvalue.Int64Exact(80), "green": knownvalue.Int64Exact(20),
				})),
				endpointValue("deployments.green.environment_variables.SCORER_VERSION", knownvalue.StringExact("v2")),
			},
			Check: resource.ComposeAggregateTestCheckFunc(
				expectServed("green", "green", "v2", ""),
				expectServed("blue", "blue", "v1", ""),
				engineEndpoint(c, func(got *api.Endpoint) error {
					if got.Traffic["blue"] != 80 || got.Traffic["green"] != 20 {
						return fmt.Errorf("engine traffic %v; want blue 80, green 20", got.Traffic)
					}
					return nil
				}),
			),
		}, {
			// Live traffic back to blue; green shadows 10% of it.
			Config:           config(deployments(blue, green) + "  traffic = { blue = 100, green = 0 }\n  mirror_traffic = { green = 10 }\n"),
			ConfigPlanChecks: updatedInPlace(testAccEndpointAddr),
			ConfigStateChecks: []statecheck.StateCheck{
				endpointValue("mirror_traffic", knownvalue.MapExact(map[string]knownvalue.Check{"green": knownvalue.Int64Exact(10)})),
			},
			Check: engineEndpoint(c, func(got *api.Endpoint) error {
				if got.MirrorTraffic["green"] != 10 {
					return fmt.Errorf("engine mirror traffic %v; want green 10", got.MirrorTraffic)
				}
				return nil
			}),
		}, {
			// Green goes, with its traffic and mirror in the same apply.
			Config:           config(deployments(blue) + "  traffic = { blue = 100 }\n"),
			ConfigPlanChecks: updatedInPlace(testAccEndpointAddr),
			ConfigStateChecks: []statecheck.StateCheck{
				endpointValue("mirror_traffic", emptyMap),
				endpointValue("deployments", knownvalue.MapSizeExact(1)),
			},
			Check: resource.ComposeAggregateTestCheckFunc(
				expectServed("", "blue", "v1", ""),
				expectStatus(primaryKey, "green", http.StatusNotFound),
				engineEndpoint(c, func(got *api.Endpoint) error {
					if _, ok := got.Deployments["green"]; ok || len(got.Deployments) != 1 {
						return fmt.Errorf("engine deployments after removing green: %d", len(got.Deployments))
					}
					return nil
				}),
			),
		}},
	})
}

// Changing what a deployment runs, or its code, rolls it out in place: the plan shows the
// change (for code, from the code's hash), and afterwards the new version serves.
func TestAccOnlineEndpoint_Rollout(t *testing.T) {
	t.Parallel()
	e, c := testAccServingEngine(t)
	code := t.TempDir()
	writeVersion := func(v string) {
		if err := os.WriteFile(filepath.Join(code, "VERSION"), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeVersion("code-1")
	config := func(version string) string {
		return testAccEndpointConfig(e.Endpoint, deployments(testAccDeployment(t, "blue", version,
			fmt.Sprintf("code_path = %q", code)))+"  traffic = { blue = 100 }\n")
	}
	var firstSnapshot string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccEndpointDestroyed(c),
		Steps: []resource.TestStep{{
			Config: config("v1"),
			ConfigStateChecks: []statecheck.StateCheck{
				endpointValue("deployments.blue.code_path", knownvalue.StringExact(code)),
				endpointValue("deployments.blue.code_snapshot_id", knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{64}$`))),
			},
			Check: resource.ComposeAggregateTestCheckFunc(
				expectServed("", "blue", "v1", "code-1"),
				func(s *terraform.State) error {
					firstSnapshot = s.RootModule().Resources[testAccEndpointAddr].Primary.Attributes["deployments.blue.code_snapshot_id"]
					return nil
				},
			),
		}, {
			Config:           config("v2"),
			ConfigPlanChecks: updatedInPlace(testAccEndpointAddr),
			Check: resource.ComposeAggregateTestCheckFunc(
				expectServed("", "blue", "v2", "code-1"),
				engineEndpoint(c, func(got *api.Endpoint) error {
					if g := got.Deployments["blue"].Generation; g < 2 {
						return fmt.Errorf("blue's generation is %d after a rollout; want 2 or more", g)
					}
					return nil
				}),
			),
		}, {
			// The same configuration, but the code changed: the plan shows a rollout.
			PreConfig:        func() { writeVersion("code-2") },
			Config:           config("v2"),
			ConfigPlanChecks: updatedInPlace(testAccEndpointAddr),
			Check: resource.ComposeAggregateTestCheckFunc(
				expectServed("", "blue", "v2", "code-2"),
				func(s *terraform.State) error {
					if now := s.RootModule().Resources[testAccEndpointAddr].Primary.Attributes["deployments.blue.code_snapshot_id"]; now == firstSnapshot {
						return fmt.Errorf("code_snapshot_id did not change with the code (%s)", now)
					}
					return nil
				},
			),
		}},
	})
}

// Keys regenerated outside Terraform are read back without a diff; an endpoint deleted
// outside Terraform is planned for creation again.
func TestAccOnlineEndpoint_Drift(t *testing.T) {
	t.Parallel()
	e, c := testAccServingEngine(t)
	config := testAccEndpointConfig(e.Endpoint, deployments(testAccDeployment(t, "blue", "v1", ""))+"  traffic = { blue = 100 }\n")
	var oldKey string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccEndpointDestroyed(c),
		Steps: []resource.TestStep{{
			Config: config,
			Check: func(s *terraform.State) error {
				sc, err := scoringFrom(s)
				oldKey = sc.primary
				return err
			},
		}, {
			PreConfig: func() {
				if _, err := c.RegenerateEndpointKeys(context.Background(), "lab", "churn", api.KeyPrimary); err != nil {
					t.Fatal(err)
				}
			},
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			Check: resource.ComposeAggregateTestCheckFunc(
				func(s *terraform.State) error {
					if sc, _ := scoringFrom(s); sc.primary == oldKey {
						return fmt.Errorf("primary_key in state is still the regenerated key")
					}
					return nil
				},
				expectStatus(primaryKey, "", http.StatusOK),
				expectStatus(func(scoring) string { return oldKey }, "", http.StatusUnauthorized),
			),
		}, {
			PreConfig: func() {
				upd := api.EndpointUpdate{Deployments: map[string]api.DeploymentSpec{}, Traffic: map[string]int64{}}
				got, err := c.GetEndpoint(context.Background(), "lab", "churn")
				if err != nil {
					t.Fatal(err)
				}
				for name, d := range got.Deployments {
					upd.Deployments[name] = d.DeploymentSpec
				}
				upd.AuthMode = got.AuthMode
				if _, err := c.UpdateEndpoint(context.Background(), "lab", "churn", upd); err != nil {
					t.Fatal(err)
				}
			},
			Config:             config,
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
		}, {
			Config:           config,
			ConfigPlanChecks: updatedInPlace(testAccEndpointAddr),
			Check:            expectServed("", "blue", "v1", ""),
		}, {
			PreConfig: func() {
				if err := c.DeleteEndpoint(context.Background(), "lab", "churn"); err != nil {
					t.Fatal(err)
				}
			},
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccEndpointAddr, plancheck.ResourceActionCreate)},
			},
			Check: expectServed("", "blue", "v1", ""),
		}},
	})
}

// A deployment that never passes its readiness probe fails the create with the engine's
// account, and the endpoint is tracked (tainted), not lost.
func TestAccOnlineEndpoint_NeverReady(t *testing.T) {
	t.Parallel()
	e, c := testAccServingEngine(t)
	config := testAccEndpointConfig(e.Endpoint, fmt.Sprintf(`  deployments = {
    blue = {
      instance_type         = "Standard_DS2_v2"
      command               = %s
      environment_variables = { SCORER_NEVER_READY = "1" }
      readiness_probe       = { initial_delay = "PT0S", period = "PT1S", failure_threshold = 2 }
    }
  }
`, testScorerCommand(t)))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccEndpointDestroyed(c),
		Steps: []resource.TestStep{{
			Config:      config,
			ExpectError: expectError("Online Endpoint Create Failed", "did not become ready", "blue"),
		}, {
			// The failed endpoint is in state, tainted: the next apply replaces it.
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccEndpointAddr, plancheck.ResourceActionDestroyBeforeCreate)},
			},
			ExpectError: expectError("Online Endpoint Create Failed", "did not become ready"),
		}},
	})
}

// Every bad input is refused at plan time with the engine's own rules.
func TestAccOnlineEndpoint_InvalidInputs(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	dep := func(name, extra string) string {
		return fmt.Sprintf("    %s = {\n      instance_type = \"Standard_DS2_v2\"\n      command = [\"serve\"]\n      %s\n    }\n", name, extra)
	}
	two := deployments(dep("blue", ""), dep("green", ""))
	endpoint := func(body string) string { return testAccEndpointConfig(e.Endpoint, body) }
	missing := filepath.Join(t.TempDir(), "no-such-dir")
	tests := []struct {
		name   string
		config string
		want   *regexp.Regexp
	}{
		{"traffic sums to 90", endpoint(two + "  traffic = { blue = 80, green = 10 }\n"),
			expectError("Invalid Traffic", "must sum to 100", "got 90")},
		{"traffic to an unknown deployment", endpoint(two + "  traffic = { blue = 50, red = 50 }\n"),
			expectError("Invalid Traffic", "red", "blue", "green")},
		{"traffic over 100", endpoint(two + "  traffic = { blue = 120 }\n"),
			expectError("Invalid Traffic", `traffic for deployment "blue" must be a percent between 0 and 100, got 120`)},
		{"two mirrors", endpoint(deployments(dep("blue", ""), dep("green", ""), dep("red", "")) +
			"  traffic = { blue = 100 }\n  mirror_traffic = { green = 10, red = 10 }\n"),
			expectError("Invalid Traffic", "mirror_traffic may name at most one deployment, got 2 (green, red)")},
		{"mirror of 60", endpoint(two + "  traffic = { blue = 100 }\n  mirror_traffic = { green = 60 }\n"),
			expectError("Invalid Traffic", `mirror_traffic for deployment "green" must be a percent between 0 and 50, got 60`)},
		{"mirror to a deployment with live traffic", endpoint(two + "  traffic = { blue = 50, green = 50 }\n  mirror_traffic = { green = 10 }\n"),
			expectError("Invalid Traffic", `deployment "green" receives 50% of live traffic, so it cannot also be the mirror`)},
		{"bad endpoint name", testAccWorkspaceConfig(e.Endpoint, `name = "lab"`) + `
resource "mlcompute_online_endpoint" "test" {
  name         = "1churn"
  workspace_id = mlcompute_workspace.test.id
` + deployments(dep("blue", "")) + "}\n",
			expectError("Invalid Online Endpoint Name", `"1churn"`)},
		{"bad deployment name", endpoint(deployments(dep("blue_1", ""))),
			expectError("Invalid Deployment Name", `"blue_1"`)},
		{"no deployment", endpoint("  deployments = {}\n"), expectError("deployments", "at least 1")},
		{"instance_count 0", endpoint(deployments(dep("blue", "instance_count = 0"))),
			expectError("instance_count", "between 1 and 100")},
		{"PORT in environment_variables", endpoint(deployments(dep("blue", `environment_variables = { PORT = "80" }`))),
			expectError("Invalid Environment Variable", "PORT is set by the engine")},
		{"bad environment variable name", endpoint(deployments(dep("blue", `environment_variables = { "1X" = "a" }`))),
			expectError("Invalid Environment Variable", `"1X" is not allowed`)},
		{"unknown instance_type", endpoint(deployments(`    blue = {
      instance_type = "Standard_Foo_v9"
      command       = ["serve"]
    }
`)), expectError("Invalid Instance Type", `"Standard_Foo_v9"`)},
		{"retired instance_type", endpoint(deployments(`    blue = {
      instance_type = "Standard_NC6"
      command       = ["serve"]
    }
`)), expectError("Invalid Instance Type", "retired on 2023-08-31")},
		{"empty command", endpoint(deployments(`    blue = {
      instance_type = "Standard_DS2_v2"
      command       = []
    }
`)), expectError("command", "at least 1")},
		{"request timeout 0", endpoint(deployments(dep("blue", "request_settings = { request_timeout_ms = 0 }"))),
			expectError("request_timeout_ms", "between 1 and 180000")},
		{"request timeout too long", endpoint(deployments(dep("blue", "request_settings = { request_timeout_ms = 180001 }"))),
			expectError("request_timeout_ms", "between 1 and 180000")},
		{"no concurrency", endpoint(deployments(dep("blue", "request_settings = { max_concurrent_requests_per_instance = 0 }"))),
			expectError("max_concurrent_requests_per_instance", "at least 1")},
		{"probe period not ISO 8601", endpoint(deployments(dep("blue", `liveness_probe = { period = "10s" }`))),
			expectError("Invalid Probe Duration", `"10s"`)},
		{"probe path without slash", endpoint(deployments(dep("blue", `readiness_probe = { path = "health" }`))),
			expectError("Invalid Probe Path", `"health"`)},
		{"probe threshold 0", endpoint(deployments(dep("blue", `readiness_probe = { failure_threshold = 0 }`))),
			expectError("failure_threshold", "between 1 and 1000")},
		{"bad auth_mode", endpoint(deployments(dep("blue", "")) + `  auth_mode = "password"` + "\n"),
			expectError("auth_mode", "key", "aml_token", `"password"`)},
		{"environment_id not an ID", endpoint(deployments(dep("blue", `environment_id = "train"`))),
			expectError("Invalid Environment ID", "/workspaces/{workspace}/environments/{name}")},
		// The workspace must be known at plan time for this check, so it is written out.
		{"environment_id of another workspace", testAccWorkspaceConfig(e.Endpoint, `name = "lab"`) + `
resource "mlcompute_online_endpoint" "test" {
  name         = "churn"
  workspace_id = "/workspaces/lab"
` + deployments(dep("blue", `environment_id = "/workspaces/other/environments/train"`)) + "}\n",
			expectError("Invalid Environment ID", `is in workspace "other"`, "endpoint is in workspace \"lab\"")},
		{"missing code_path", endpoint(deployments(dep("blue", fmt.Sprintf("code_path = %q", missing)))),
			expectError("Cannot Snapshot Code", missing)},
		{"missing model_path", endpoint(deployments(dep("blue", fmt.Sprintf("model_path = %q", missing)))),
			expectError("Cannot Snapshot Model", "model directory", missing)},
		{"scale type", endpoint(deployments(dep("blue", `scale_settings = { type = "TargetUtilization" }`))),
			expectError("type", "default", "target_utilization")},
		{"min above max", endpoint(deployments(dep("blue", `scale_settings = { type = "target_utilization", min_instances = 4, max_instances = 2 }`))),
			expectError("Invalid Scale Settings", "min_instances (4) must not exceed max_instances (2)")},
		{"min negative", endpoint(deployments(dep("blue", `scale_settings = { min_instances = -1 }`))),
			expectError("min_instances", "between 0 and 100")},
		{"max 0", endpoint(deployments(dep("blue", `scale_settings = { max_instances = 0 }`))),
			expectError("max_instances", "between 1 and 100")},
		{"max above the bound", endpoint(deployments(dep("blue", `scale_settings = { max_instances = 101 }`))),
			expectError("max_instances", "between 1 and 100")},
		{"percent 0", endpoint(deployments(dep("blue", `scale_settings = { target_utilization_percentage = 0 }`))),
			expectError("target_utilization_percentage", "between 1 and 100")},
		{"percent 101", endpoint(deployments(dep("blue", `scale_settings = { target_utilization_percentage = 101 }`))),
			expectError("target_utilization_percentage", "between 1 and 100")},
		{"polling_interval not ISO 8601", endpoint(deployments(dep("blue", `scale_settings = { polling_interval = "1s" }`))),
			expectError("Invalid Scale Duration", `polling_interval "1s" is not an ISO 8601 duration`)},
		{"polling_interval too short", endpoint(deployments(dep("blue", `scale_settings = { polling_interval = "PT0S" }`))),
			expectError("Invalid Scale Duration", "between PT1S and PT10M")},
		{"scale_down_delay too long", endpoint(deployments(dep("blue", `scale_settings = { scale_down_delay = "P8D" }`))),
			expectError("Invalid Scale Duration", "scale_down_delay", "between PT1S and P7D")},
		{"scale_to_zero_delay not ISO 8601", endpoint(deployments(dep("blue", `scale_settings = { scale_to_zero_delay = "soon" }`))),
			expectError("Invalid Scale Duration", `scale_to_zero_delay "soon"`)},
		{"max_queue_wait_ms 0", endpoint(deployments(dep("blue", "request_settings = { max_queue_wait_ms = 0 }"))),
			expectError("max_queue_wait_ms", "between 1 and 600000")},
	}
	var steps []resource.TestStep
	for _, tt := range tests {
		steps = append(steps, resource.TestStep{Config: tt.config, PlanOnly: true, ExpectError: tt.want})
	}
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, Steps: steps})
}

func TestAccOnlineEndpoint_ImportErrors(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	config := testAccEndpointConfig(e.Endpoint, deployments(`    blue = {
      instance_type = "Standard_DS2_v2"
      command       = ["serve"]
    }
`))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:        config,
			ResourceName:  testAccEndpointAddr,
			ImportState:   true,
			ImportStateId: "/workspaces/lab/computes/churn",
			ExpectError:   expectError("Invalid Online Endpoint ID", "/workspaces/{workspace}/onlineEndpoints/{name}"),
		}, {
			Config:        config,
			ResourceName:  testAccEndpointAddr,
			ImportState:   true,
			ImportStateId: "/workspaces/lab/onlineEndpoints/nothing",
			ExpectError:   regexp.MustCompile(`(?i)cannot import non-existent remote object`),
		}},
	})
}

func TestOnlineEndpointSchema(t *testing.T) {
	ctx := context.Background()
	var resp fwresource.SchemaResponse
	NewOnlineEndpointResource().Schema(ctx, fwresource.SchemaRequest{}, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatalf("schema: %v", resp.Diagnostics)
	}
	if diags := resp.Schema.ValidateImplementation(ctx); diags.HasError() {
		t.Fatalf("schema implementation: %v", diags)
	}
	for _, name := range []string{"primary_key", "secondary_key"} {
		if a := resp.Schema.Attributes[name]; !a.IsSensitive() || !a.IsComputed() || a.IsOptional() {
			t.Errorf("%s must be computed and sensitive", name)
		}
	}
	// The model's attribute types are the schema's: a mismatch would fail every read.
	dep := resp.Schema.Attributes["deployments"].(schema.MapNestedAttribute)
	if got := dep.NestedObject.Type(); !got.Equal(deploymentObjectType) {
		t.Errorf("deployment object type %s; the model uses %s", got, deploymentObjectType)
	}
	// Only the name and workspace replace the endpoint.
	for name, a := range resp.Schema.Attributes {
		s, ok := a.(schema.StringAttribute)
		if !ok || name == "name" || name == "workspace_id" {
			continue
		}
		for _, m := range s.PlanModifiers {
			if strings.Contains(m.Description(ctx), "replace") {
				t.Errorf("%s forces replacement", name)
			}
		}
	}
}

// The plan's code_snapshot_id is the hash the engine gives the uploaded snapshot: stable
// for unchanged code, different for changed code, and null or unknown with code_path.
func TestPlannedSnapshotID(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "score.py"), []byte("print(1)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	at := path.Root("deployments").AtMapKey("blue").AtName("code_path")
	first, diags := plannedSnapshotID(types.StringValue(dir), at, "code")
	if diags.HasError() || first.IsNull() || first.IsUnknown() {
		t.Fatalf("snapshot of %s = %v, %v", dir, first, diags)
	}
	again, _ := plannedSnapshotID(types.StringValue(dir), at, "code")
	if !again.Equal(first) {
		t.Errorf("unchanged code hashed to %s, then %s", first, again)
	}
	archive, id, err := packCode(dir, true)
	if err != nil || id != first.ValueString() || len(archive) == 0 {
		t.Errorf("packCode = %d bytes, %s, %v; want the planned ID %s", len(archive), id, err, first)
	}
	if err := os.WriteFile(filepath.Join(dir, "score.py"), []byte("print(2)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed, _ := plannedSnapshotID(types.StringValue(dir), at, "code"); changed.Equal(first) {
		t.Error("changed code kept its snapshot ID")
	}
	if v, d := plannedSnapshotID(types.StringNull(), at, "code"); !v.IsNull() || d.HasError() {
		t.Errorf("no code_path: %v, %v; want null", v, d)
	}
	if v, d := plannedSnapshotID(types.StringUnknown(), at, "code"); !v.IsUnknown() || d.HasError() {
		t.Errorf("unknown code_path: %v, %v; want unknown", v, d)
	}
	v, d := plannedSnapshotID(types.StringValue(filepath.Join(dir, "missing")), at, "code")
	if !d.HasError() || !v.IsUnknown() {
		t.Fatalf("missing directory: %v, %v; want an error", v, d)
	}
	if got := d.Errors()[0].(diag.DiagnosticWithPath).Path(); !got.Equal(at) {
		t.Errorf("error on %s; want %s", got, at)
	}
}

func TestKnownInt64Map(t *testing.T) {
	known := types.MapValueMust(types.Int64Type, map[string]attr.Value{"blue": types.Int64Value(80), "green": types.Int64Value(20)})
	if m, ok := knownInt64Map(known); !ok || m["blue"] != 80 || m["green"] != 20 || len(m) != 2 {
		t.Errorf("knownInt64Map = %v, %v", m, ok)
	}
	partly := types.MapValueMust(types.Int64Type, map[string]attr.Value{"blue": types.Int64Unknown()})
	if _, ok := knownInt64Map(partly); ok {
		t.Error("a map with an unknown value counted as known")
	}
	if _, ok := knownInt64Map(types.MapUnknown(types.Int64Type)); ok {
		t.Error("an unknown map counted as known")
	}
	if m, ok := knownInt64Map(types.MapNull(types.Int64Type)); !ok || len(m) != 0 {
		t.Errorf("a null map = %v, %v; want empty and known", m, ok)
	}
}

// With auth_mode = "aml_token" a key no longer scores and an engine-issued token does;
// switching back to keys is an in-place update too.
func TestAccOnlineEndpoint_AMLToken(t *testing.T) {
	t.Parallel()
	e, c := testAccServingEngine(t)
	config := func(mode string) string {
		return testAccEndpointConfig(e.Endpoint, deployments(testAccDeployment(t, "blue", "v1", ""))+
			fmt.Sprintf("  traffic = { blue = 100 }\n  auth_mode = %q\n", mode))
	}
	token := func(scoring) string {
		tok, err := c.GetEndpointToken(context.Background(), "lab", "churn")
		if err != nil {
			return "no token: " + err.Error()
		}
		return tok.AccessToken
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccEndpointDestroyed(c),
		Steps: []resource.TestStep{{
			Config:            config(api.AuthModeAMLToken),
			ConfigStateChecks: []statecheck.StateCheck{endpointValue("auth_mode", knownvalue.StringExact(api.AuthModeAMLToken))},
			Check: resource.ComposeAggregateTestCheckFunc(
				expectStatus(token, "", http.StatusOK),
				expectStatus(primaryKey, "", http.StatusUnauthorized),
				expectStatus(noKey, "", http.StatusUnauthorized),
			),
		}, {
			Config:           config(api.AuthModeKey),
			ConfigPlanChecks: updatedInPlace(testAccEndpointAddr),
			Check: resource.ComposeAggregateTestCheckFunc(
				expectStatus(primaryKey, "", http.StatusOK),
				expectStatus(token, "", http.StatusUnauthorized),
			),
		}},
	})
}
