package provider

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// An autoscaled deployment: created at min_instances = 0 (no instance runs, the first
// request starts one and gets 200), its scale settings changed in place without a rollout,
// imported, and planned empty after each apply, though its instance count moves at run time.
func TestAccOnlineEndpoint_Autoscale(t *testing.T) {
	t.Parallel()
	e, c := testAccServingEngine(t)
	config := func(scale string) string {
		return testAccEndpointConfig(e.Endpoint, deployments(testAccDeployment(t, "blue", "v1", "scale_settings = "+scale))+
			"  traffic = { blue = 100 }\n")
	}
	first := config(`{ type = "target_utilization", min_instances = 0, max_instances = 3, scale_down_delay = "PT2S" }`)
	second := config(`{ type = "target_utilization", min_instances = 1, max_instances = 4, target_utilization_percentage = 50, polling_interval = "PT2S", scale_down_delay = "PT1M", scale_to_zero_delay = "PT3M" }`)
	var generation int64
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccEndpointDestroyed(c),
		Steps: []resource.TestStep{{
			Config: first,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccEndpointAddr, plancheck.ResourceActionCreate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				endpointValue("provisioning_state", knownvalue.StringExact(api.ProvisioningSucceeded)),
				endpointValue("deployments.blue.instance_count", knownvalue.Int64Exact(1)),
				endpointValue("deployments.blue.request_settings.max_queue_wait_ms", knownvalue.Int64Exact(api.DefaultMaxQueueWaitFromZeroMS)),
				endpointValue("deployments.blue.scale_settings", knownvalue.ObjectExact(map[string]knownvalue.Check{
					"type":                          knownvalue.StringExact(api.ScaleTypeTargetUtilization),
					"min_instances":                 knownvalue.Int64Exact(0),
					"max_instances":                 knownvalue.Int64Exact(3),
					"target_utilization_percentage": knownvalue.Int64Exact(70),
					"polling_interval":              knownvalue.StringExact("PT1S"),
					"scale_down_delay":              knownvalue.StringExact("PT2S"),
					"scale_to_zero_delay":           knownvalue.Null(),
				})),
			},
			Check: resource.ComposeAggregateTestCheckFunc(
				engineEndpoint(c, func(got *api.Endpoint) error {
					generation = got.Deployments["blue"].Generation
					if d := got.Deployments["blue"].DesiredInstances; d != 0 {
						return fmt.Errorf("blue wants %d instances before any request; want 0", d)
					}
					return nil
				}),
				expectStatus(primaryKey, "", http.StatusOK),
				engineEndpoint(c, func(got *api.Endpoint) error {
					d := got.Deployments["blue"]
					if d.DesiredInstances < 1 || len(d.ScaleDecisions) == 0 || d.ScaleDecisions[0].From != 0 {
						return fmt.Errorf("after the first request blue wants %d instances with decisions %+v; want a decision from 0", d.DesiredInstances, d.ScaleDecisions)
					}
					return nil
				}),
			),
		}, {
			Config:           second,
			ConfigPlanChecks: updatedInPlace(testAccEndpointAddr),
			ConfigStateChecks: []statecheck.StateCheck{
				endpointValue("deployments.blue.request_settings.max_queue_wait_ms", knownvalue.Int64Exact(api.DefaultMaxQueueWaitMS)),
				endpointValue("deployments.blue.scale_settings.max_instances", knownvalue.Int64Exact(4)),
				endpointValue("deployments.blue.scale_settings.scale_to_zero_delay", knownvalue.StringExact("PT3M")),
			},
			Check: engineEndpoint(c, func(got *api.Endpoint) error {
				d := got.Deployments["blue"]
				if d.Generation != generation {
					return fmt.Errorf("scale settings rolled blue out (generation %d -> %d); they apply in place", generation, d.Generation)
				}
				if d.DesiredInstances < 1 {
					return fmt.Errorf("blue wants %d instances with min_instances = 1", d.DesiredInstances)
				}
				return nil
			}),
		}, {
			ResourceName:      testAccEndpointAddr,
			ImportState:       true,
			ImportStateId:     "/workspaces/lab/onlineEndpoints/churn",
			ImportStateVerify: true,
		}, {
			// Back to a fixed count: in place, and instance_count may be set again.
			Config: testAccEndpointConfig(e.Endpoint, deployments(testAccDeployment(t, "blue", "v1", "instance_count = 2"))+
				"  traffic = { blue = 100 }\n"),
			ConfigPlanChecks: updatedInPlace(testAccEndpointAddr),
			ConfigStateChecks: []statecheck.StateCheck{
				endpointValue("deployments.blue.scale_settings.type", knownvalue.StringExact(api.ScaleTypeDefault)),
				endpointValue("deployments.blue.instance_count", knownvalue.Int64Exact(2)),
			},
			Check: engineEndpoint(c, func(got *api.Endpoint) error {
				if d := got.Deployments["blue"]; d.DesiredInstances != 2 || d.ReadyInstances != 2 {
					return fmt.Errorf("blue wants %d and has %d ready; want 2 and 2", d.DesiredInstances, d.ReadyInstances)
				}
				return nil
			}),
		}},
	})
}
