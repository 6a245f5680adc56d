package provider

import (
	"context"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	fwresource "github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
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

const testAccClusterAddr = "mlcompute_compute_cluster.test"

// testAccClusterConfig is the provider block, a workspace "lab" with the given extra body
// and one cluster in it with the given body.
func testAccClusterConfig(endpoint, workspaceBody, clusterBody string) string {
	return testAccWorkspaceConfig(endpoint, "name = \"lab\"\n"+workspaceBody) +
		"resource \"mlcompute_compute_cluster\" \"test\" {\n  workspace_id = mlcompute_workspace.test.id\n" + clusterBody + "\n}\n"
}

// testAccCPUCluster is a cluster "cpu" of Standard_DS3_v2 with the given scale settings
// and extra attributes.
func testAccCPUCluster(endpoint, scaleSettings, extra string) string {
	return testAccClusterConfig(endpoint, "", `
  name           = "cpu"
  vm_size        = "Standard_DS3_v2"
  scale_settings = `+scaleSettings+"\n"+extra)
}

// clusterValue is a state check of one attribute of the test cluster; nested attributes
// are written with dots ("scale_settings.min_node_count").
func clusterValue(attr string, check knownvalue.Check) statecheck.StateCheck {
	return statecheck.ExpectKnownValue(testAccClusterAddr, attrPath(attr), check)
}

// testAccClusterCounters is the mlcompute_compute data source reading the test cluster's
// runtime counters (testAccComputeAddr).
const testAccClusterCounters = `
data "mlcompute_compute" "test" {
  workspace_id = mlcompute_compute_cluster.test.workspace_id
  name         = mlcompute_compute_cluster.test.name
}
`

const testAccComputeAddr = "data.mlcompute_compute.test"

// computeValue is a state check of one attribute the mlcompute_compute data source read.
func computeValue(attr string, check knownvalue.Check) statecheck.StateCheck {
	return dataValue(testAccComputeAddr, attr, check)
}

// noNodes is node_state_counts of a cluster without nodes.
var noNodes = knownvalue.ObjectExact(map[string]knownvalue.Check{
	"idle": knownvalue.Int64Exact(0), "running": knownvalue.Int64Exact(0), "preparing": knownvalue.Int64Exact(0),
	"leaving": knownvalue.Int64Exact(0), "unusable": knownvalue.Int64Exact(0), "preempted": knownvalue.Int64Exact(0),
})

// engineCompute checks the compute the engine holds.
func engineCompute(c *client.Client, ws, name string, check func(*api.Compute) error) resource.TestCheckFunc {
	return func(*terraform.State) error {
		got, err := c.GetCompute(context.Background(), ws, name)
		if err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		return check(got)
	}
}

// waitForCompute polls the engine until cond holds for the compute. The engine's controller
// runs on its own goroutines, so the test waits for it; the loop is bounded only so that a
// broken rule fails instead of hanging, and no assertion is about time.
func waitForCompute(t *testing.T, c *client.Client, ws, name, what string, cond func(*api.Compute) bool) *api.Compute {
	t.Helper()
	for range 2000 {
		got, err := c.GetCompute(context.Background(), ws, name)
		if err == nil && cond(got) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("compute %s/%s never reached: %s", ws, name, what)
	return nil
}

// importedState returns the imported object with the given ID: an import step lists every
// object of the state, in no fixed order.
func importedState(states []*terraform.InstanceState, id string) (*terraform.InstanceState, error) {
	for _, s := range states {
		if s.ID == id || s.Attributes["id"] == id {
			return s, nil
		}
	}
	return nil, fmt.Errorf("no imported object has the ID %s (imported %d objects)", id, len(states))
}

// testAccClusterDestroyed checks that the engine no longer holds the cluster and that
// every node was released by the time destroy returned.
func testAccClusterDestroyed(e *enginetest.Engine, c *client.Client, ws, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		if _, err := c.GetCompute(context.Background(), ws, name); !api.IsNotFound(err) {
			return fmt.Errorf("compute %s/%s still exists after destroy (err %v)", ws, name, err)
		}
		if nodes := e.Driver.Nodes(); len(nodes) != 0 {
			return fmt.Errorf("nodes left after destroy: %v", nodes)
		}
		return nil
	}
}

func TestAccComputeCluster_Basic(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccClusterDestroyed(e, c, "lab", "cpu"),
		Steps: []resource.TestStep{{
			Config: testAccCPUCluster(e.Endpoint, `{ max_node_count = 4 }`, ""),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccClusterAddr, plancheck.ResourceActionCreate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				clusterValue("id", knownvalue.StringExact("/workspaces/lab/computes/cpu")),
				clusterValue("name", knownvalue.StringExact("cpu")),
				clusterValue("workspace_id", knownvalue.StringExact("/workspaces/lab")),
				clusterValue("vm_size", knownvalue.StringExact("Standard_DS3_v2")),
				clusterValue("vm_priority", knownvalue.StringExact("Dedicated")),
				clusterValue("scale_settings", knownvalue.ObjectExact(map[string]knownvalue.Check{
					"min_node_count":                       knownvalue.Int64Exact(0),
					"max_node_count":                       knownvalue.Int64Exact(4),
					"scale_down_nodes_after_idle_duration": knownvalue.StringExact("PT120S"),
				})),
				clusterValue("description", knownvalue.StringExact("")),
				clusterValue("tags", emptyMap),
				clusterValue("current_node_count", knownvalue.Int64Exact(0)),
				// The engine's fake clock starts at 2026-01-05 09:00 UTC.
				clusterValue("created_on", knownvalue.StringExact("2026-01-05T09:00:00Z")),
				clusterValue("timeouts", knownvalue.Null()),
			},
			Check: engineCompute(c, "lab", "cpu", func(got *api.Compute) error {
				if got.Type != api.TypeComputeCluster || got.ScaleSettings == nil || got.ScaleSettings.MaxNodeCount != 4 {
					return fmt.Errorf("engine holds %+v", got)
				}
				return nil
			}),
		}, {
			ResourceName:            testAccClusterAddr,
			ImportState:             true,
			ImportStateId:           "/workspaces/lab/computes/cpu",
			ImportStateVerify:       true,
			ImportStateVerifyIgnore: []string{"timeouts"},
		}},
	})
}

// Scale settings, description and tags change in place, one at a time and all together;
// the cluster is never replaced (created_on stays).
func TestAccComputeCluster_UpdateInPlace(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	createdOn := statecheck.CompareValue(compare.ValuesSame())
	update := updatedInPlace(testAccClusterAddr)
	settings := func(lo, hi int64, idle string) statecheck.StateCheck {
		return clusterValue("scale_settings", knownvalue.ObjectExact(map[string]knownvalue.Check{
			"min_node_count":                       knownvalue.Int64Exact(lo),
			"max_node_count":                       knownvalue.Int64Exact(hi),
			"scale_down_nodes_after_idle_duration": knownvalue.StringExact(idle),
		}))
	}
	engineSettings := func(want api.ScaleSettings) resource.TestCheckFunc {
		return engineCompute(c, "lab", "cpu", func(got *api.Compute) error {
			if *got.ScaleSettings != want {
				return fmt.Errorf("engine scale settings %+v, want %+v", *got.ScaleSettings, want)
			}
			return nil
		})
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccClusterDestroyed(e, c, "lab", "cpu"),
		Steps: []resource.TestStep{{
			Config: testAccCPUCluster(e.Endpoint, `{ max_node_count = 2 }`, ""),
			ConfigStateChecks: []statecheck.StateCheck{
				settings(0, 2, "PT120S"),
				createdOn.AddStateValue(testAccClusterAddr, tfjsonpath.New("created_on")),
			},
		}, {
			PreConfig:        func() { e.Clock.Step(time.Hour) },
			Config:           testAccCPUCluster(e.Endpoint, `{ max_node_count = 6 }`, ""),
			ConfigPlanChecks: update,
			ConfigStateChecks: []statecheck.StateCheck{
				settings(0, 6, "PT120S"),
				createdOn.AddStateValue(testAccClusterAddr, tfjsonpath.New("created_on")),
			},
			Check: engineSettings(api.ScaleSettings{MinNodeCount: 0, MaxNodeCount: 6, ScaleDownNodesAfterIdleDuration: "PT120S"}),
		}, {
			Config:           testAccCPUCluster(e.Endpoint, `{ max_node_count = 6, min_node_count = 1 }`, ""),
			ConfigPlanChecks: update,
			ConfigStateChecks: []statecheck.StateCheck{
				settings(1, 6, "PT120S"),
				createdOn.AddStateValue(testAccClusterAddr, tfjsonpath.New("created_on")),
			},
			Check: engineSettings(api.ScaleSettings{MinNodeCount: 1, MaxNodeCount: 6, ScaleDownNodesAfterIdleDuration: "PT120S"}),
		}, {
			Config: testAccCPUCluster(e.Endpoint, `{
    min_node_count                       = 1
    max_node_count                       = 6
    scale_down_nodes_after_idle_duration = "PT15M"
  }`, ""),
			ConfigPlanChecks: update,
			ConfigStateChecks: []statecheck.StateCheck{
				settings(1, 6, "PT15M"),
				createdOn.AddStateValue(testAccClusterAddr, tfjsonpath.New("created_on")),
			},
			Check: engineSettings(api.ScaleSettings{MinNodeCount: 1, MaxNodeCount: 6, ScaleDownNodesAfterIdleDuration: "PT15M"}),
		}, {
			Config: testAccCPUCluster(e.Endpoint, `{ max_node_count = 3 }`, `
  description = "nightly training"
  tags        = { team = "lab", env = "dev" }
`),
			ConfigPlanChecks: update,
			ConfigStateChecks: []statecheck.StateCheck{
				settings(0, 3, "PT120S"),
				clusterValue("description", knownvalue.StringExact("nightly training")),
				clusterValue("tags", knownvalue.MapExact(map[string]knownvalue.Check{
					"team": knownvalue.StringExact("lab"), "env": knownvalue.StringExact("dev"),
				})),
				createdOn.AddStateValue(testAccClusterAddr, tfjsonpath.New("created_on")),
			},
			Check: engineCompute(c, "lab", "cpu", func(got *api.Compute) error {
				if got.Description != "nightly training" || got.Tags["env"] != "dev" || got.ScaleSettings.MaxNodeCount != 3 {
					return fmt.Errorf("engine holds %+v", got)
				}
				return nil
			}),
		}, {
			// Removing the optional attributes clears them in place.
			Config:           testAccCPUCluster(e.Endpoint, `{ max_node_count = 3 }`, ""),
			ConfigPlanChecks: update,
			ConfigStateChecks: []statecheck.StateCheck{
				clusterValue("description", knownvalue.StringExact("")),
				clusterValue("tags", emptyMap),
				createdOn.AddStateValue(testAccClusterAddr, tfjsonpath.New("created_on")),
			},
		}, {
			ResourceName:            testAccClusterAddr,
			ImportState:             true,
			ImportStateVerify:       true,
			ImportStateVerifyIgnore: []string{"timeouts"},
		}},
	})
}

// vm_size and vm_priority cannot change in place: changing either replaces the cluster.
func TestAccComputeCluster_ReplaceOnSizeOrPriority(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	cluster := func(size, extra string) string {
		return testAccClusterConfig(e.Endpoint, "", fmt.Sprintf(`
  name           = "cpu"
  vm_size        = %q
  scale_settings = { max_node_count = 2 }
%s`, size, extra))
	}
	replace := resource.ConfigPlanChecks{
		PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccClusterAddr, plancheck.ResourceActionReplace)},
		PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccClusterDestroyed(e, c, "lab", "cpu"),
		Steps: []resource.TestStep{{
			Config: cluster("Standard_DS3_v2", ""),
		}, {
			PreConfig:        func() { e.Clock.Step(time.Hour) },
			Config:           cluster("Standard_F4s_v2", ""),
			ConfigPlanChecks: replace,
			ConfigStateChecks: []statecheck.StateCheck{
				clusterValue("vm_size", knownvalue.StringExact("Standard_F4s_v2")),
				clusterValue("created_on", knownvalue.StringExact("2026-01-05T10:00:00Z")),
			},
			Check: engineCompute(c, "lab", "cpu", func(got *api.Compute) error {
				if got.VMSize != "Standard_F4s_v2" {
					return fmt.Errorf("engine vm_size %q", got.VMSize)
				}
				return nil
			}),
		}, {
			PreConfig:        func() { e.Clock.Step(time.Hour) },
			Config:           cluster("Standard_F4s_v2", `  vm_priority = "LowPriority"`),
			ConfigPlanChecks: replace,
			ConfigStateChecks: []statecheck.StateCheck{
				clusterValue("vm_priority", knownvalue.StringExact("LowPriority")),
				clusterValue("created_on", knownvalue.StringExact("2026-01-05T11:00:00Z")),
			},
			Check: engineCompute(c, "lab", "cpu", func(got *api.Compute) error {
				if got.VMPriority != api.PriorityLowPriority {
					return fmt.Errorf("engine vm_priority %q", got.VMPriority)
				}
				return nil
			}),
		}, {
			// Back to the default is a change too.
			Config:           cluster("Standard_F4s_v2", ""),
			ConfigPlanChecks: replace,
			ConfigStateChecks: []statecheck.StateCheck{
				clusterValue("vm_priority", knownvalue.StringExact("Dedicated")),
			},
		}},
	})
}

// Sizes match case-insensitively: a size spelled in another case applies, the state keeps
// that spelling (no diff, no inconsistent result), and the engine holds the catalog's.
// An import records the catalog's spelling (TestAccComputeCluster_ImportExisting shows that
// a configuration in another case is then an in-place update, never a replacement).
func TestAccComputeCluster_VMSizeCaseInsensitive(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	config := testAccClusterConfig(e.Endpoint, "", `
  name           = "cpu"
  vm_size        = "standard_ds3_v2"
  scale_settings = { max_node_count = 2 }
`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				clusterValue("vm_size", knownvalue.StringExact("standard_ds3_v2")),
			},
			Check: engineCompute(c, "lab", "cpu", func(got *api.Compute) error {
				if got.VMSize != "Standard_DS3_v2" {
					return fmt.Errorf("engine vm_size %q, want the canonical Standard_DS3_v2", got.VMSize)
				}
				return nil
			}),
		}, {
			Config:   config,
			PlanOnly: true,
		}, {
			// An import knows no configured spelling: it records the catalog's.
			ResourceName:  testAccClusterAddr,
			ImportState:   true,
			ImportStateId: "/workspaces/lab/computes/cpu",
			ImportStateCheck: func(states []*terraform.InstanceState) error {
				imported, err := importedState(states, "/workspaces/lab/computes/cpu")
				if err != nil {
					return err
				}
				if got := imported.Attributes["vm_size"]; got != "Standard_DS3_v2" {
					return fmt.Errorf("imported vm_size %q, want the canonical Standard_DS3_v2", got)
				}
				return nil
			},
		}},
	})
}

// A cluster made outside Terraform imports with every value the engine holds, and the plan
// right after the import is empty. A configuration that spells the size in another case
// than the catalog then plans an in-place update of the spelling alone, not a replacement.
func TestAccComputeCluster_ImportExisting(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	// An imported object has no recorded dependencies until an apply writes them, so
	// force_destroy lets the final destroy succeed even if the test stops before one.
	config := testAccClusterConfig(e.Endpoint, "force_destroy = true", `
  name        = "gpu"
  vm_size     = "Standard_F4s_v2"
  vm_priority = "LowPriority"
  description = "made by hand"
  tags        = { owner = "ops" }
  scale_settings = {
    max_node_count                       = 3
    scale_down_nodes_after_idle_duration = "PT5M"
  }
`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			// The workspace comes first, from Terraform; the cluster is then made by hand.
			Config: testAccWorkspaceConfig(e.Endpoint, "name = \"lab\"\nforce_destroy = true"),
		}, {
			PreConfig: func() {
				_, err := c.CreateCompute(context.Background(), "lab", api.ComputeSpec{
					Name: "gpu", Type: api.TypeComputeCluster, VMSize: "standard_f4s_v2", VMPriority: api.PriorityLowPriority,
					Description: "made by hand", Tags: map[string]string{"owner": "ops"},
					ScaleSettings: &api.ScaleSettings{MaxNodeCount: 3, ScaleDownNodesAfterIdleDuration: "PT5M"},
				})
				if err != nil {
					t.Fatal(err)
				}
			},
			Config:             config,
			ResourceName:       testAccClusterAddr,
			ImportState:        true,
			ImportStateId:      "/workspaces/lab/computes/gpu",
			ImportStatePersist: true,
			ImportStateCheck: func(states []*terraform.InstanceState) error {
				imported, err := importedState(states, "/workspaces/lab/computes/gpu")
				if err != nil {
					return err
				}
				want := map[string]string{
					"id": "/workspaces/lab/computes/gpu", "name": "gpu", "workspace_id": "/workspaces/lab",
					"vm_size": "Standard_F4s_v2", "vm_priority": "LowPriority", "description": "made by hand",
					"tags.owner": "ops", "scale_settings.min_node_count": "0", "scale_settings.max_node_count": "3",
					"scale_settings.scale_down_nodes_after_idle_duration": "PT5M", "current_node_count": "0",
					"created_on": "2026-01-05T09:00:00Z",
				}
				for k, v := range want {
					if got := imported.Attributes[k]; got != v {
						return fmt.Errorf("imported %s = %q, want %q", k, got, v)
					}
				}
				return nil
			},
		}, {
			Config:   config,
			PlanOnly: true, // fails on any planned change
		}, {
			Config: strings.Replace(config, "Standard_F4s_v2", "standard_f4s_v2", 1),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(testAccClusterAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(testAccClusterAddr, tfjsonpath.New("vm_size"), knownvalue.StringExact("standard_f4s_v2")),
				},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				clusterValue("vm_size", knownvalue.StringExact("standard_f4s_v2")),
				clusterValue("created_on", knownvalue.StringExact("2026-01-05T09:00:00Z")),
			},
			Check: engineCompute(c, "lab", "gpu", func(got *api.Compute) error {
				if got.VMSize != "Standard_F4s_v2" {
					return fmt.Errorf("engine vm_size %q", got.VMSize)
				}
				return nil
			}),
		}},
	})
}

func TestAccComputeCluster_ImportErrors(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	config := testAccCPUCluster(e.Endpoint, `{ max_node_count = 1 }`, "")
	var steps []resource.TestStep
	for _, tt := range []struct {
		id   string
		want *regexp.Regexp
	}{
		{"cpu", expectError("Invalid Compute Cluster ID", "/workspaces/{workspace}/computes/{name}")},
		{"/workspaces/lab", expectError("Invalid Compute Cluster ID")},
		{"/workspaces/lab/onlineEndpoints/cpu", expectError("Invalid Compute Cluster ID")},
		{"/workspaces/lab/computes/cpu", expectError("Cannot import non-existent remote object")},
	} {
		steps = append(steps, resource.TestStep{
			Config:        config,
			ResourceName:  testAccClusterAddr,
			ImportState:   true,
			ImportStateId: tt.id,
			ExpectError:   tt.want,
		})
	}
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, Steps: steps})
}

// The engine scales the cluster when a job needs a node; current_node_count follows on
// refresh and never makes a plan, and the mlcompute_compute data source reads the other
// counters. The node stays after its job until its idle time runs out.
func TestAccComputeCluster_NoDriftAfterScaling(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	ctx := context.Background()
	config := testAccCPUCluster(e.Endpoint, `{ max_node_count = 2 }`, "") + testAccClusterCounters
	empty := resource.ConfigPlanChecks{
		PreApply:             []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
		PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
	}
	counts := func(idle, running int64) knownvalue.Check {
		return knownvalue.ObjectExact(map[string]knownvalue.Check{
			"idle": knownvalue.Int64Exact(idle), "running": knownvalue.Int64Exact(running), "preparing": knownvalue.Int64Exact(0),
			"leaving": knownvalue.Int64Exact(0), "unusable": knownvalue.Int64Exact(0), "preempted": knownvalue.Int64Exact(0),
		})
	}
	var job *api.Job
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccClusterDestroyed(e, c, "lab", "cpu"),
		Steps: []resource.TestStep{{
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				clusterValue("current_node_count", knownvalue.Int64Exact(0)),
				computeValue("id", knownvalue.StringExact("/workspaces/lab/computes/cpu")),
				computeValue("type", knownvalue.StringExact("ComputeCluster")),
				computeValue("current_node_count", knownvalue.Int64Exact(0)),
				computeValue("target_node_count", knownvalue.Int64Exact(0)),
				computeValue("allocation_state", knownvalue.StringExact("Steady")),
				computeValue("node_state_counts", noNodes),
			},
		}, {
			PreConfig: func() {
				var err error
				if job, err = c.SubmitJob(ctx, "lab", api.JobSpec{Compute: "cpu", Command: []string{"train"}}); err != nil {
					t.Fatal(err)
				}
				waitForCompute(t, c, "lab", "cpu", "one node running the job", func(got *api.Compute) bool {
					return got.CurrentNodeCount == 1 && got.NodeStateCounts.Running == 1 && got.AllocationState == api.AllocationSteady
				})
			},
			Config:           config,
			ConfigPlanChecks: empty,
			ConfigStateChecks: []statecheck.StateCheck{
				clusterValue("current_node_count", knownvalue.Int64Exact(1)),
				computeValue("current_node_count", knownvalue.Int64Exact(1)),
				computeValue("target_node_count", knownvalue.Int64Exact(1)),
				computeValue("allocation_state", knownvalue.StringExact("Steady")),
				computeValue("node_state_counts", counts(0, 1)),
			},
		}, {
			PreConfig: func() {
				j, err := c.GetJob(ctx, "lab", job.ID)
				if err != nil || len(j.Nodes) != 1 {
					t.Fatalf("job %+v, %v; want it on one node", j, err)
				}
				// The engine names a job's tasks; find the one running on the job's node.
				var task string
				for _, nt := range e.Driver.RunningTasks() {
					if node, key, _ := strings.Cut(nt, "/"); node == j.Nodes[0] {
						task = key
					}
				}
				if task == "" {
					t.Fatalf("no task running on node %s", j.Nodes[0])
				}
				e.Driver.FinishTask(j.Nodes[0], task, 0)
				waitForCompute(t, c, "lab", "cpu", "the node idle after its job", func(got *api.Compute) bool {
					return got.NodeStateCounts.Idle == 1
				})
			},
			Config:           config,
			ConfigPlanChecks: empty,
			ConfigStateChecks: []statecheck.StateCheck{
				clusterValue("current_node_count", knownvalue.Int64Exact(1)),
				computeValue("node_state_counts", counts(1, 0)),
			},
		}, {
			PreConfig: func() {
				e.Clock.Step(121 * time.Second) // past scale_down_nodes_after_idle_duration
				waitForCompute(t, c, "lab", "cpu", "the idle node released", func(got *api.Compute) bool {
					return got.CurrentNodeCount == 0 && len(got.Nodes) == 0
				})
			},
			Config:           config,
			ConfigPlanChecks: empty,
			ConfigStateChecks: []statecheck.StateCheck{
				clusterValue("current_node_count", knownvalue.Int64Exact(0)),
				computeValue("node_state_counts", noNodes),
			},
		}},
	})
}

// Destroying a cluster whose job still runs cancels the job and returns once the node is
// released (CheckDestroy finds no node left).
func TestAccComputeCluster_DestroyReleasesNodes(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	var job *api.Job
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(s *terraform.State) error {
			if err := testAccClusterDestroyed(e, c, "lab", "cpu")(s); err != nil {
				return err
			}
			if got, err := c.GetJob(context.Background(), "lab", job.ID); err == nil && got.Status != api.JobCanceled {
				return fmt.Errorf("job %s after destroy; want Canceled", got.Status)
			}
			return nil
		},
		Steps: []resource.TestStep{{
			Config: testAccCPUCluster(e.Endpoint, `{ max_node_count = 1 }`, `  timeouts = { delete = "2m" }`),
			Check: func(*terraform.State) error {
				var err error
				if job, err = c.SubmitJob(context.Background(), "lab", api.JobSpec{Compute: "cpu", Command: []string{"train"}}); err != nil {
					return err
				}
				waitForCompute(t, c, "lab", "cpu", "a node running the job", func(got *api.Compute) bool {
					return got.NodeStateCounts.Running == 1
				})
				return nil
			},
			ConfigStateChecks: []statecheck.StateCheck{
				clusterValue("timeouts", knownvalue.ObjectExact(map[string]knownvalue.Check{
					"create": knownvalue.Null(), "update": knownvalue.Null(), "delete": knownvalue.StringExact("2m"),
				})),
			},
		}},
	})
}

// A create the provider stopped waiting for leaves the cluster tracked, never untracked:
// the error names the timeout, and the cluster's ID is in state (tainted). Had the engine
// created it anyway (the PreConfig does so, as if only the answer was lost), the next
// apply reads it back and replaces it instead of failing with "already exists".
func TestAccComputeCluster_CreateTimeout(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccClusterDestroyed(e, c, "lab", "cpu"),
		Steps: []resource.TestStep{{
			Config:      testAccCPUCluster(e.Endpoint, `{ max_node_count = 1 }`, `  timeouts = { create = "1ns" }`),
			ExpectError: expectError("Compute Cluster Create Timed Out", "after 1ns, the create timeout", `timeouts = { create = "2ns" }`),
		}, {
			PreConfig: func() {
				_, err := c.CreateCompute(context.Background(), "lab", api.ComputeSpec{
					Name: "cpu", Type: api.TypeComputeCluster, VMSize: "Standard_DS3_v2", ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1},
				})
				if err != nil {
					t.Fatal(err)
				}
				e.Clock.Step(time.Hour)
			},
			Config: testAccCPUCluster(e.Endpoint, `{ max_node_count = 1 }`, ""),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccClusterAddr, plancheck.ResourceActionDestroyBeforeCreate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				clusterValue("id", knownvalue.StringExact("/workspaces/lab/computes/cpu")),
				clusterValue("created_on", knownvalue.StringExact("2026-01-05T10:00:00Z")),
			},
		}},
	})
}

// Changes made outside Terraform show as drift, and apply puts the configuration back; a
// cluster deleted outside Terraform is created again.
func TestAccComputeCluster_Drift(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	ctx := context.Background()
	config := testAccCPUCluster(e.Endpoint, `{ max_node_count = 4 }`, `  description = "managed"`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: config,
		}, {
			PreConfig: func() {
				_, err := c.UpdateCompute(ctx, "lab", "cpu", api.ComputeUpdate{
					Description:   "managed",
					ScaleSettings: &api.ScaleSettings{MinNodeCount: 0, MaxNodeCount: 8, ScaleDownNodesAfterIdleDuration: "PT30M"},
				})
				if err != nil {
					t.Fatal(err)
				}
			},
			Config:             config,
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
		}, {
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(testAccClusterAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(testAccClusterAddr, attrPath("scale_settings.max_node_count"), knownvalue.Int64Exact(4)),
				},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			Check: engineCompute(c, "lab", "cpu", func(got *api.Compute) error {
				if s := got.ScaleSettings; s.MaxNodeCount != 4 || s.ScaleDownNodesAfterIdleDuration != "PT120S" {
					return fmt.Errorf("apply did not restore the scale settings: %+v", s)
				}
				return nil
			}),
		}, {
			PreConfig: func() {
				if err := c.DeleteCompute(ctx, "lab", "cpu"); err != nil {
					t.Fatal(err)
				}
			},
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccClusterAddr, plancheck.ResourceActionCreate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			Check: engineCompute(c, "lab", "cpu", func(*api.Compute) error { return nil }),
		}},
	})
}

// Every bad input is refused at plan time, with the engine's own words where the engine
// has the rule.
func TestAccComputeCluster_InvalidInputs(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	cluster := func(name, size, settings, extra string) string {
		return testAccClusterConfig(e.Endpoint, "", fmt.Sprintf(`
  name           = %q
  vm_size        = %q
  scale_settings = %s
%s`, name, size, settings, extra))
	}
	tests := []struct {
		name   string
		config string
		want   *regexp.Regexp
	}{
		{"name too short", cluster("ab", "Standard_DS3_v2", `{ max_node_count = 1 }`, ""),
			expectError("Invalid Compute Name", `invalid compute name "ab"`, "3 to 24 characters")},
		{"name with bad characters", cluster("cpu_pool", "Standard_DS3_v2", `{ max_node_count = 1 }`, ""),
			expectError("Invalid Compute Name", `invalid compute name "cpu_pool"`, "letters, digits and '-'")},
		{"name too long", cluster("abcdefghijklmnopqrstuvwxy", "Standard_DS3_v2", `{ max_node_count = 1 }`, ""),
			expectError("Invalid Compute Name", "3 to 24 characters")},
		{"name ending in -digits", cluster("gpu-42", "Standard_DS3_v2", `{ max_node_count = 1 }`, ""),
			expectError("Invalid Compute Name", `invalid compute name "gpu-42"`, "must not end in '-' followed by digits")},
		{"workspace_id malformed", testAccWorkspaceConfig(e.Endpoint, `name = "lab"`) + `
resource "mlcompute_compute_cluster" "test" {
  name           = "cpu"
  workspace_id   = "lab"
  vm_size        = "Standard_DS3_v2"
  scale_settings = { max_node_count = 1 }
}`, expectError("Invalid Workspace ID", `ID "lab" is not of the form /workspaces/{workspace}`)},
		{"workspace_id of a compute", testAccWorkspaceConfig(e.Endpoint, `name = "lab"`) + `
resource "mlcompute_compute_cluster" "test" {
  name           = "cpu"
  workspace_id   = "/workspaces/lab/computes/cpu"
  vm_size        = "Standard_DS3_v2"
  scale_settings = { max_node_count = 1 }
}`, expectError("Invalid Workspace ID", "is not of the form /workspaces/{workspace}")},
		{"unknown vm_size", cluster("cpu", "Standard_Foo_v9", `{ max_node_count = 1 }`, ""),
			expectError("Invalid VM Size", `unknown VM size "Standard_Foo_v9"`, "mlcompute_vm_sizes")},
		{"retired vm_size", cluster("gpu", "Standard_NC6", `{ max_node_count = 1 }`, ""),
			expectError("Invalid VM Size", `VM size "Standard_NC6" was retired on 2023-08-31`, `use "Standard_NC4as_T4_v3" instead`)},
		{"retired vm_size in another case", cluster("gpu", "standard_nc6", `{ max_node_count = 1 }`, ""),
			expectError("Invalid VM Size", "retired on 2023-08-31")},
		{"bad vm_priority", cluster("cpu", "Standard_DS3_v2", `{ max_node_count = 1 }`, `vm_priority = "Spot"`),
			expectError("vm_priority", "must be one of", "Dedicated", "LowPriority", `got: "Spot"`)},
		{"LowPriority on a size that cannot", cluster("big", "Standard_M128ms", `{ max_node_count = 1 }`, `vm_priority = "LowPriority"`),
			expectError("Invalid VM Priority", "Standard_M128ms cannot run at LowPriority; use Dedicated")},
		{"min_node_count negative", cluster("cpu", "Standard_DS3_v2", `{ min_node_count = -1, max_node_count = 1 }`, ""),
			expectError("Invalid Scale Settings", "min_node_count must be 0 or more, got -1")},
		{"max_node_count zero", cluster("cpu", "Standard_DS3_v2", `{ max_node_count = 0 }`, ""),
			expectError("Invalid Scale Settings", "max_node_count must be between 1 and 65000, got 0")},
		{"max_node_count above the bound", cluster("cpu", "Standard_DS3_v2", `{ max_node_count = 2305843009213693952 }`, ""),
			expectError("Invalid Scale Settings", "max_node_count must be between 1 and 65000, got 2305843009213693952")},
		{"min_node_count near 2^62", cluster("cpu", "Standard_DS3_v2", `{ min_node_count = 4611686018427387903, max_node_count = 4611686018427387904 }`, ""),
			expectError("Invalid Scale Settings", "min_node_count must be at most 65000, got 4611686018427387903")},
		{"min above max", cluster("cpu", "Standard_DS3_v2", `{ min_node_count = 3, max_node_count = 2 }`, ""),
			expectError("Invalid Scale Settings", "min_node_count (3) must not be greater than max_node_count (2)")},
		{"idle duration too long", cluster("cpu", "Standard_DS3_v2", `{ max_node_count = 1, scale_down_nodes_after_idle_duration = "P8D" }`, ""),
			expectError("Invalid Idle Duration", `"P8D" is out of range`, "between PT0S and P7D")},
		{"idle duration not ISO 8601", cluster("cpu", "Standard_DS3_v2", `{ max_node_count = 1, scale_down_nodes_after_idle_duration = "120s" }`, ""),
			expectError("Invalid Idle Duration", `"120s" is not an ISO 8601 duration`)},
		{"idle duration in months", cluster("cpu", "Standard_DS3_v2", `{ max_node_count = 1, scale_down_nodes_after_idle_duration = "P1M" }`, ""),
			expectError("Invalid Idle Duration", "uses years or months")},
		{"bad timeout", cluster("cpu", "Standard_DS3_v2", `{ max_node_count = 1 }`, `timeouts = { delete = "20 minutes" }`),
			expectError("Invalid Attribute Value Time Duration", `"20 minutes" must be a string containing`)},
	}
	var steps []resource.TestStep
	for _, tt := range tests {
		steps = append(steps, resource.TestStep{Config: tt.config, PlanOnly: true, ExpectError: tt.want})
	}
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, Steps: steps})
}

// Whether a workspace exists is the engine's to say: a well-formed workspace_id of a
// workspace that does not exist fails at apply, and nothing is left behind.
func TestAccComputeCluster_WorkspaceNotFound(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccProviderConfig(e.Endpoint) + `
resource "mlcompute_compute_cluster" "test" {
  name           = "cpu"
  workspace_id   = "/workspaces/nowhere"
  vm_size        = "Standard_DS3_v2"
  scale_settings = { max_node_count = 1 }
}`,
			ExpectError: expectError("Cannot Create Compute Cluster", `workspace "nowhere" not found`),
		}},
	})
}

func TestAccComputeCluster_NameTaken(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			// force_destroy: the cluster made by hand is never in state, so the workspace
			// takes it along when the test destroys everything.
			Config: testAccWorkspaceConfig(e.Endpoint, "name = \"lab\"\nforce_destroy = true"),
		}, {
			PreConfig: func() {
				_, err := c.CreateCompute(context.Background(), "lab", api.ComputeSpec{
					Name: "cpu", Type: api.TypeComputeCluster, VMSize: "Standard_DS3_v2", ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1},
				})
				if err != nil {
					t.Fatal(err)
				}
			},
			Config: testAccClusterConfig(e.Endpoint, "force_destroy = true", `
  name           = "cpu"
  vm_size        = "Standard_DS3_v2"
  scale_settings = { max_node_count = 1 }
`),
			ExpectError: expectError("Cannot Create Compute Cluster", `compute "cpu" already exists`, "terraform import", "/workspaces/lab/computes/cpu"),
		}},
	})
}

// A GPU family requires approval: without a quota on the workspace, create fails with an
// error on vm_size that names the family; adding the quota fixes it. Scaling past
// the quota later fails at plan time, the workspace being there.
func TestAccComputeCluster_QuotaExceeded(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	gpu := func(quotas string, maxNodes int) string {
		return testAccClusterConfig(e.Endpoint, quotas, fmt.Sprintf(`
  name           = "gpu"
  vm_size        = "Standard_NC6s_v3"
  scale_settings = { max_node_count = %d }
`, maxNodes))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccClusterDestroyed(e, c, "lab", "gpu"),
		Steps: []resource.TestStep{{
			// The workspace is created in the same plan: the quota is checked at apply, when
			// Terraform plans the cluster again with the workspace's ID, before the create.
			Config: gpu("", 2),
			ExpectError: expectError("Workspace Quota Exceeded", `Workspace "lab" has 0 of its 0 vCPUs of standardNCSv3Family left`,
				"less than one node of Standard_NC6s_v3", "family standardNCSv3Family requires approval",
				"quotas = { standardNCSv3Family = 12 }"),
		}, {
			Config: gpu(`quotas = { standardNCSv3Family = 12 }`, 2),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				clusterValue("scale_settings.max_node_count", knownvalue.Int64Exact(2)),
			},
		}, {
			// The workspace exists now, so the plan checks the quota (see
			// TestAccComputeCluster_QuotaCheckedAtPlan) before the engine would.
			Config: gpu(`quotas = { standardNCSv3Family = 12 }`, 3),
			ExpectError: expectError("Workspace Quota Exceeded", "needs 18 vCPUs of standardNCSv3Family",
				"quotas = { standardNCSv3Family = 18 }"),
		}, {
			Config:           gpu(`quotas = { standardNCSv3Family = 18 }`, 3),
			ConfigPlanChecks: updatedInPlace(testAccClusterAddr),
			ConfigStateChecks: []statecheck.StateCheck{
				clusterValue("scale_settings.max_node_count", knownvalue.Int64Exact(3)),
			},
		}},
	})
}

// min_node_count > 0 plans with a warning (see TestIdleNodesWarning), not an error: the
// cluster applies and the engine keeps the minimum up without drift.
func TestAccComputeCluster_MinNodesApplyWithWarning(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	config := testAccCPUCluster(e.Endpoint, `{ min_node_count = 1, max_node_count = 2 }`, "")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccClusterDestroyed(e, c, "lab", "cpu"),
		Steps: []resource.TestStep{{
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				clusterValue("scale_settings.min_node_count", knownvalue.Int64Exact(1)),
			},
		}, {
			PreConfig: func() {
				waitForCompute(t, c, "lab", "cpu", "the minimum node up", func(got *api.Compute) bool {
					return got.CurrentNodeCount == 1 && got.AllocationState == api.AllocationSteady
				})
			},
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				clusterValue("current_node_count", knownvalue.Int64Exact(1)),
			},
		}},
	})
}

func TestIdleNodesWarning(t *testing.T) {
	size := types.StringValue("Standard_DS3_v2")
	for _, tt := range []struct {
		name     string
		minNodes types.Int64
		vmSize   types.String
		want     string // "" for no warning
	}{
		{"zero", types.Int64Value(0), size, ""},
		{"null", types.Int64Null(), size, ""},
		{"unknown", types.Int64Unknown(), size, ""},
		{"one", types.Int64Value(1), size, "keeps 1 node(s) of Standard_DS3_v2 running at all times"},
		{"unknown size", types.Int64Value(3), types.StringUnknown(), "keeps 3 node(s) of its VM size"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := idleNodesWarning(tt.minNodes, tt.vmSize)
			if tt.want == "" {
				if d != nil {
					t.Fatalf("got %v, want no warning", d)
				}
				return
			}
			if d == nil || d.Severity() != diag.SeverityWarning {
				t.Fatalf("got %v, want a warning", d)
			}
			wp, ok := d.(diag.DiagnosticWithPath)
			if !ok || !wp.Path().Equal(path.Root("scale_settings").AtName("min_node_count")) {
				t.Errorf("warning not on scale_settings.min_node_count: %v", d)
			}
			if d.Summary() != "Compute Cluster Keeps Idle Nodes" || !strings.Contains(d.Detail(), tt.want) ||
				!strings.Contains(d.Detail(), "Set min_node_count = 0") {
				t.Errorf("warning %q / %q; want it to contain %q and the fix", d.Summary(), d.Detail(), tt.want)
			}
		})
	}
}

func TestScaleSettingsChecks(t *testing.T) {
	known := func(lo, hi types.Int64) []api.ScaleSettings {
		return scaleSettingsModel{MinNodeCount: lo, MaxNodeCount: hi}.checks()
	}
	if got := known(types.Int64Value(2), types.Int64Value(4)); len(got) != 3 || got[2] != (api.ScaleSettings{MinNodeCount: 2, MaxNodeCount: 4}) {
		t.Errorf("known values: %+v; want min, max and min<=max checked", got)
	}
	if got := known(types.Int64Unknown(), types.Int64Value(4)); len(got) != 1 || got[0].MaxNodeCount != 4 {
		t.Errorf("unknown min: %+v; want max alone", got)
	}
	if got := known(types.Int64Value(5), types.Int64Unknown()); len(got) != 1 || got[0].MinNodeCount != 5 {
		t.Errorf("unknown max: %+v; want min alone", got)
	}
	if got := known(types.Int64Value(-1), types.Int64Value(0)); len(got) != 2 {
		t.Errorf("two bad counts: %+v; want each checked alone and min<=max skipped", got)
	}
	if got := known(types.Int64Null(), types.Int64Value(3)); len(got) != 3 || got[2].MinNodeCount != 0 {
		t.Errorf("unset min: %+v; want the default 0", got)
	}
}

func TestComputeClusterSchema(t *testing.T) {
	ctx := context.Background()
	var resp fwresource.SchemaResponse
	NewComputeClusterResource().Schema(ctx, fwresource.SchemaRequest{}, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatalf("schema: %v", resp.Diagnostics)
	}
	if diags := resp.Schema.ValidateImplementation(ctx); diags.HasError() {
		t.Fatalf("schema implementation: %v", diags)
	}
	// Runtime attributes must never plan a change: computed only, no plan modifiers. DESIGN
	// lists all four on the resource (the mlcompute_compute data source has them too).
	for _, name := range []string{"current_node_count", "target_node_count", "allocation_state", "node_state_counts"} {
		a, ok := resp.Schema.Attributes[name]
		if !ok {
			t.Fatalf("%s is missing", name)
		}
		if !a.IsComputed() || a.IsOptional() || a.IsRequired() {
			t.Errorf("%s must be computed only", name)
		}
		var n int
		switch a := a.(type) {
		case schema.Int64Attribute:
			n = len(a.PlanModifiers)
		case schema.StringAttribute:
			n = len(a.PlanModifiers)
		case schema.SingleNestedAttribute:
			n = len(a.PlanModifiers)
		}
		if n != 0 {
			t.Errorf("%s has plan modifiers; runtime attributes must have none", name)
		}
	}
	// Scale settings are updated in place: nothing may force a replacement.
	settings := resp.Schema.Attributes["scale_settings"].(schema.SingleNestedAttribute)
	if len(settings.PlanModifiers) != 0 {
		t.Errorf("scale_settings has plan modifiers")
	}
	for name, a := range settings.Attributes {
		switch a := a.(type) {
		case schema.Int64Attribute:
			if len(a.PlanModifiers) != 0 {
				t.Errorf("scale_settings.%s has plan modifiers", name)
			}
		case schema.StringAttribute:
			if len(a.PlanModifiers) != 0 {
				t.Errorf("scale_settings.%s has plan modifiers", name)
			}
		}
	}
}

// TestComputeClusterModifyPlan runs ModifyPlan on plans built from the schema: the cost
// warning lands on min_node_count when a plan sets the kept nodes, and only a new size is checked against the catalog, so
// a cluster whose size was since retired can still be planned.
func TestComputeClusterModifyPlan(t *testing.T) {
	ctx := context.Background()
	r := NewComputeClusterResource().(*computeClusterResource)
	var sr fwresource.SchemaResponse
	r.Schema(ctx, fwresource.SchemaRequest{}, &sr)
	object := func(size string, minNodes int64, priority ...string) tftypes.Value {
		v := map[string]any{
			"name": "cpu", "workspace_id": "/workspaces/lab", "vm_size": size, "vm_priority": append(priority, "Dedicated")[0],
			"scale_settings": map[string]any{"min_node_count": minNodes, "max_node_count": int64(2), "scale_down_nodes_after_idle_duration": "PT120S"},
		}
		return tfObject(t, sr.Schema.Type().TerraformType(ctx), v)
	}
	tests := []struct {
		name        string
		prior, plan tftypes.Value
		wantErr     string
		wantWarning bool
	}{
		{name: "create", plan: object("Standard_DS3_v2", 0)},
		{name: "create with a minimum", plan: object("Standard_DS3_v2", 2), wantWarning: true},
		{name: "create with a retired size", plan: object("Standard_NC6", 0), wantErr: "retired on 2023-08-31"},
		{name: "unchanged retired size", prior: object("Standard_NC6", 0), plan: object("Standard_NC6", 1), wantWarning: true},
		{name: "minimum unchanged", prior: object("Standard_DS3_v2", 2), plan: object("Standard_DS3_v2", 2)},
		{name: "minimum raised", prior: object("Standard_DS3_v2", 1), plan: object("Standard_DS3_v2", 2), wantWarning: true},
		{name: "new size with the same minimum", prior: object("Standard_DS3_v2", 2), plan: object("Standard_DS4_v2", 2), wantWarning: true},
		{name: "retired size in another case", prior: object("Standard_NC6", 0), plan: object("standard_nc6", 0)},
		{name: "new size is checked", prior: object("Standard_DS3_v2", 0), plan: object("Standard_Foo", 0), wantErr: "unknown VM size"},
		{name: "LowPriority on a new size", plan: object("Standard_M128ms", 0, "LowPriority"), wantErr: "cannot run at LowPriority"},
		{name: "new priority on the same size", prior: object("Standard_M128ms", 0), plan: object("Standard_M128ms", 0, "LowPriority"),
			wantErr: "cannot run at LowPriority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.prior.Type() == nil {
				tt.prior = tftypes.NewValue(sr.Schema.Type().TerraformType(ctx), nil)
			}
			req := fwresource.ModifyPlanRequest{
				Plan:  tfsdk.Plan{Schema: sr.Schema, Raw: tt.plan},
				State: tfsdk.State{Schema: sr.Schema, Raw: tt.prior},
			}
			resp := fwresource.ModifyPlanResponse{Plan: req.Plan}
			r.ModifyPlan(ctx, req, &resp)
			errs, warns := resp.Diagnostics.Errors(), resp.Diagnostics.Warnings()
			switch {
			case tt.wantErr == "" && len(errs) > 0:
				t.Fatalf("unexpected errors: %v", errs)
			case tt.wantErr != "" && (len(errs) != 1 || !strings.Contains(errs[0].Detail(), tt.wantErr)):
				t.Fatalf("errors %v; want one containing %q", errs, tt.wantErr)
			}
			if got := len(warns) == 1; got != tt.wantWarning {
				t.Fatalf("warnings %v; want a warning: %v", warns, tt.wantWarning)
			}
			if tt.wantWarning {
				if p := warns[0].(diag.DiagnosticWithPath).Path(); !p.Equal(path.Root("scale_settings").AtName("min_node_count")) {
					t.Errorf("warning on %s", p)
				}
			}
		})
	}
}

// tfObject builds a value of an object type from Go values, leaving unset attributes null.
func tfObject(t *testing.T, typ tftypes.Type, v any) tftypes.Value {
	t.Helper()
	switch typ := typ.(type) {
	case tftypes.Object:
		m, _ := v.(map[string]any)
		attrs := map[string]tftypes.Value{}
		for name, at := range typ.AttributeTypes {
			if av, ok := m[name]; ok {
				attrs[name] = tfObject(t, at, av)
			} else {
				attrs[name] = tftypes.NewValue(at, nil)
			}
		}
		return tftypes.NewValue(typ, attrs)
	case tftypes.Map, tftypes.List, tftypes.Set:
		return tftypes.NewValue(typ, nil)
	}
	if n, ok := v.(int64); ok {
		return tftypes.NewValue(typ, new(big.Float).SetInt64(n))
	}
	return tftypes.NewValue(typ, v)
}
