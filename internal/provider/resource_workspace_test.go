package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

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

const testAccWorkspaceAddr = "mlcompute_workspace.test"

// testAccWorkspaceConfig is the provider block plus one workspace with the given body.
func testAccWorkspaceConfig(endpoint, body string) string {
	return testAccProviderConfig(endpoint) + "resource \"mlcompute_workspace\" \"test\" {\n" + body + "\n}\n"
}

// expectError matches the phrases of an error message in order, wherever terraform wraps
// its lines (it breaks them at spaces and starts each with a box-drawing bar).
func expectError(phrases ...string) *regexp.Regexp {
	parts := make([]string, len(phrases))
	for i, p := range phrases {
		parts[i] = strings.Join(strings.Fields(regexp.QuoteMeta(p)), `[\s│]+`)
	}
	return regexp.MustCompile(`(?s)` + strings.Join(parts, ".*"))
}

// stateValue is a shorthand for a state check of one attribute of the test workspace.
func stateValue(attr string, check knownvalue.Check) statecheck.StateCheck {
	return statecheck.ExpectKnownValue(testAccWorkspaceAddr, tfjsonpath.New(attr), check)
}

// emptyMap checks that a map attribute is {} (never null).
var emptyMap = knownvalue.MapExact(map[string]knownvalue.Check{})

// engineWorkspace checks the workspace the engine holds.
func engineWorkspace(c *client.Client, name string, check func(*api.Workspace) error) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ws, err := c.GetWorkspace(context.Background(), name)
		if err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		return check(ws)
	}
}

func TestAccWorkspace_Basic(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccWorkspaceConfig(e.Endpoint, `name = "team-a"`),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccWorkspaceAddr, plancheck.ResourceActionCreate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				stateValue("id", knownvalue.StringExact("/workspaces/team-a")),
				stateValue("name", knownvalue.StringExact("team-a")),
				stateValue("location", knownvalue.StringExact("local")),
				stateValue("description", knownvalue.StringExact("")),
				stateValue("tags", emptyMap),
				stateValue("quotas", emptyMap),
				stateValue("force_destroy", knownvalue.Bool(false)),
				// The engine's fake clock starts at 2026-01-05 09:00 UTC.
				stateValue("created_on", knownvalue.StringExact("2026-01-05T09:00:00Z")),
			},
			Check: engineWorkspace(c, "team-a", func(ws *api.Workspace) error {
				if ws.Location != "local" {
					return fmt.Errorf("engine location = %q, want local", ws.Location)
				}
				return nil
			}),
		}, {
			ResourceName:      testAccWorkspaceAddr,
			ImportState:       true,
			ImportStateId:     "/workspaces/team-a",
			ImportStateVerify: true,
		}},
	})
}

func TestAccWorkspace_UpdateInPlace(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	createdOn := statecheck.CompareValue(compare.ValuesSame())
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccWorkspaceConfig(e.Endpoint, `
  name        = "team-b"
  description = "first"
  tags        = { team = "b" }
  quotas      = { standardNCSv3Family = 48 }
`),
			ConfigStateChecks: []statecheck.StateCheck{
				stateValue("description", knownvalue.StringExact("first")),
				stateValue("tags", knownvalue.MapExact(map[string]knownvalue.Check{"team": knownvalue.StringExact("b")})),
				stateValue("quotas", knownvalue.MapExact(map[string]knownvalue.Check{"standardNCSv3Family": knownvalue.Int64Exact(48)})),
				createdOn.AddStateValue(testAccWorkspaceAddr, tfjsonpath.New("created_on")),
			},
		}, {
			PreConfig: func() { e.Clock.Step(time.Hour) },
			Config: testAccWorkspaceConfig(e.Endpoint, `
  name        = "team-b"
  description = "second"
  tags        = { team = "b", env = "dev" }
  quotas      = { standardNCSv3Family = 96, standardDSv2Family = 200 }
`),
			ConfigPlanChecks: updatedInPlace(testAccWorkspaceAddr),
			ConfigStateChecks: []statecheck.StateCheck{
				stateValue("description", knownvalue.StringExact("second")),
				stateValue("tags", knownvalue.MapExact(map[string]knownvalue.Check{"team": knownvalue.StringExact("b"), "env": knownvalue.StringExact("dev")})),
				stateValue("quotas", knownvalue.MapExact(map[string]knownvalue.Check{
					"standardNCSv3Family": knownvalue.Int64Exact(96),
					"standardDSv2Family":  knownvalue.Int64Exact(200),
				})),
				createdOn.AddStateValue(testAccWorkspaceAddr, tfjsonpath.New("created_on")),
			},
			Check: engineWorkspace(c, "team-b", func(ws *api.Workspace) error {
				if ws.Description != "second" || ws.Tags["env"] != "dev" || ws.Quotas["standardDSv2Family"] != 200 {
					return fmt.Errorf("engine holds %+v", ws)
				}
				return nil
			}),
		}, {
			// Removing the optional attributes clears them in place.
			Config:           testAccWorkspaceConfig(e.Endpoint, `name = "team-b"`),
			ConfigPlanChecks: updatedInPlace(testAccWorkspaceAddr),
			ConfigStateChecks: []statecheck.StateCheck{
				stateValue("description", knownvalue.StringExact("")),
				stateValue("tags", emptyMap),
				stateValue("quotas", emptyMap),
				createdOn.AddStateValue(testAccWorkspaceAddr, tfjsonpath.New("created_on")),
			},
			Check: engineWorkspace(c, "team-b", func(ws *api.Workspace) error {
				if ws.Description != "" || len(ws.Tags) != 0 || len(ws.Quotas) != 0 {
					return fmt.Errorf("engine still holds %+v", ws)
				}
				return nil
			}),
		}, {
			ResourceName:      testAccWorkspaceAddr,
			ImportState:       true,
			ImportStateVerify: true,
		}},
	})
}

// Leaving tags, quotas and description out and setting them empty mean the same, so
// switching between the two forms plans nothing.
func TestAccWorkspace_EmptyValuesEqualAbsent(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	explicit := testAccWorkspaceConfig(e.Endpoint, `
  name        = "team-e"
  description = ""
  tags        = {}
  quotas      = {}
`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: explicit,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				stateValue("tags", emptyMap),
				stateValue("quotas", emptyMap),
			},
		}, {
			Config:   testAccWorkspaceConfig(e.Endpoint, `name = "team-e"`),
			PlanOnly: true,
		}, {
			ResourceName:      testAccWorkspaceAddr,
			ImportState:       true,
			ImportStateVerify: true,
		}},
	})
}

func TestAccWorkspace_LocationChangeReplaces(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{Locations: []string{"local", "lab"}})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccWorkspaceConfig(e.Endpoint, `name = "team-c"`),
			ConfigStateChecks: []statecheck.StateCheck{
				stateValue("location", knownvalue.StringExact("local")),
			},
		}, {
			PreConfig: func() { e.Clock.Step(time.Hour) },
			Config: testAccWorkspaceConfig(e.Endpoint, `
  name     = "team-c"
  location = "lab"
`),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccWorkspaceAddr, plancheck.ResourceActionReplace)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				stateValue("location", knownvalue.StringExact("lab")),
				stateValue("created_on", knownvalue.StringExact("2026-01-05T10:00:00Z")),
			},
			Check: engineWorkspace(c, "team-c", func(ws *api.Workspace) error {
				if ws.Location != "lab" {
					return fmt.Errorf("engine location = %q, want lab", ws.Location)
				}
				return nil
			}),
		}, {
			ResourceName:      testAccWorkspaceAddr,
			ImportState:       true,
			ImportStateVerify: true,
		}},
	})
}

// A workspace made outside Terraform imports with every value the engine holds, and the
// plan right after the import is empty.
func TestAccWorkspace_ImportExisting(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	config := testAccWorkspaceConfig(e.Endpoint, `
  name        = "team-i"
  description = "made by hand"
  tags        = { owner = "ops" }
  quotas      = { standardNCSv3Family = 24 }
`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			PreConfig: func() {
				_, err := c.CreateWorkspace(context.Background(), api.WorkspaceSpec{
					Name: "team-i", Location: "local", Description: "made by hand",
					Tags: map[string]string{"owner": "ops"}, Quotas: map[string]int64{"standardNCSv3Family": 24},
				})
				if err != nil {
					t.Fatal(err)
				}
			},
			Config:             config,
			ResourceName:       testAccWorkspaceAddr,
			ImportState:        true,
			ImportStateId:      "/workspaces/team-i",
			ImportStatePersist: true,
			ImportStateCheck: func(states []*terraform.InstanceState) error {
				if len(states) != 1 {
					return fmt.Errorf("imported %d objects, want 1", len(states))
				}
				want := map[string]string{
					"id": "/workspaces/team-i", "name": "team-i", "location": "local",
					"description": "made by hand", "tags.owner": "ops", "quotas.standardNCSv3Family": "24",
					"force_destroy": "false", "created_on": "2026-01-05T09:00:00Z",
				}
				for k, v := range want {
					if got := states[0].Attributes[k]; got != v {
						return fmt.Errorf("imported %s = %q, want %q", k, got, v)
					}
				}
				return nil
			},
		}, {
			Config:   config,
			PlanOnly: true, // fails on any planned change
		}},
	})
}

func TestAccWorkspace_ImportErrors(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	config := testAccWorkspaceConfig(e.Endpoint, `name = "nowhere"`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:        config,
			ResourceName:  testAccWorkspaceAddr,
			ImportState:   true,
			ImportStateId: "nowhere",
			ExpectError:   expectError("Invalid Workspace ID", "/workspaces/{name}"),
		}, {
			Config:        config,
			ResourceName:  testAccWorkspaceAddr,
			ImportState:   true,
			ImportStateId: "/workspaces/nowhere/computes/x",
			ExpectError:   expectError("Invalid Workspace ID"),
		}, {
			Config:        config,
			ResourceName:  testAccWorkspaceAddr,
			ImportState:   true,
			ImportStateId: "/workspaces/nowhere",
			ExpectError:   expectError("Cannot import non-existent remote object"),
		}},
	})
}

// Changes made outside Terraform show as drift, and apply puts the configuration back; a
// workspace deleted outside Terraform is created again.
func TestAccWorkspace_Drift(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	config := testAccWorkspaceConfig(e.Endpoint, `
  name        = "team-d"
  description = "managed"
  tags        = { team = "d" }
`)
	ctx := context.Background()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: config,
		}, {
			PreConfig: func() {
				_, err := c.UpdateWorkspace(ctx, "team-d", api.WorkspaceUpdate{
					Description: "changed by hand", Tags: map[string]string{"team": "x"},
					Quotas: map[string]int64{"standardDSv2Family": 10},
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
					plancheck.ExpectResourceAction(testAccWorkspaceAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(testAccWorkspaceAddr, tfjsonpath.New("description"), knownvalue.StringExact("managed")),
					plancheck.ExpectKnownValue(testAccWorkspaceAddr, tfjsonpath.New("quotas"), emptyMap),
				},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			Check: engineWorkspace(c, "team-d", func(ws *api.Workspace) error {
				if ws.Description != "managed" || ws.Tags["team"] != "d" || len(ws.Quotas) != 0 {
					return fmt.Errorf("apply did not restore the workspace: %+v", ws)
				}
				return nil
			}),
		}, {
			PreConfig: func() {
				if err := c.DeleteWorkspace(ctx, "team-d", false); err != nil {
					t.Fatal(err)
				}
			},
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccWorkspaceAddr, plancheck.ResourceActionCreate)},
			},
			Check: engineWorkspace(c, "team-d", func(*api.Workspace) error { return nil }),
		}},
	})
}

func TestAccWorkspace_ForceDestroy(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccWorkspaceConfig(e.Endpoint, `name = "team-f"`),
			ConfigStateChecks: []statecheck.StateCheck{
				stateValue("force_destroy", knownvalue.Bool(false)),
			},
		}, {
			// force_destroy is Terraform's alone: changing it is an in-place update.
			Config: testAccWorkspaceConfig(e.Endpoint, `
  name          = "team-f"
  force_destroy = true
`),
			ConfigPlanChecks: updatedInPlace(testAccWorkspaceAddr),
			ConfigStateChecks: []statecheck.StateCheck{
				stateValue("force_destroy", knownvalue.Bool(true)),
			},
		}, {
			// Import cannot know the setting and starts from the default.
			ResourceName:  testAccWorkspaceAddr,
			ImportState:   true,
			ImportStateId: "/workspaces/team-f",
			ImportStateCheck: func(states []*terraform.InstanceState) error {
				if got := states[0].Attributes["force_destroy"]; got != "false" {
					return fmt.Errorf("imported force_destroy = %q, want false", got)
				}
				return nil
			},
		}},
	})
}

// Without force_destroy a workspace that still holds a compute is not deleted, and the
// error lists what it holds; with force_destroy = true it goes, compute and all.
func TestAccWorkspace_ForceDestroyHoldsCompute(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	ctx := context.Background()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := c.GetWorkspace(ctx, "team-h"); !api.IsNotFound(err) {
				return fmt.Errorf("workspace still there after destroy (err %v)", err)
			}
			return nil
		},
		Steps: []resource.TestStep{{
			Config: testAccWorkspaceConfig(e.Endpoint, `name = "team-h"`),
		}, {
			PreConfig: func() {
				_, err := c.CreateCompute(ctx, "team-h", api.ComputeSpec{
					Name: "cpu", Type: api.TypeComputeCluster, VMSize: "Standard_DS1_v2",
					ScaleSettings: &api.ScaleSettings{MinNodeCount: 0, MaxNodeCount: 1},
				})
				if err != nil {
					t.Fatal(err)
				}
			},
			Config:      testAccWorkspaceConfig(e.Endpoint, `name = "team-h"`),
			Destroy:     true,
			ExpectError: expectError("Cannot Delete Workspace", "/workspaces/team-h/computes/cpu", "force_destroy = true"),
		}, {
			Config: testAccWorkspaceConfig(e.Endpoint, `
  name          = "team-h"
  force_destroy = true
`),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccWorkspaceAddr, plancheck.ResourceActionUpdate)},
			},
		}},
	})
}

func TestAccWorkspace_NameTaken(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			PreConfig: func() {
				if _, err := c.CreateWorkspace(context.Background(), api.WorkspaceSpec{Name: "taken"}); err != nil {
					t.Fatal(err)
				}
			},
			Config:      testAccWorkspaceConfig(e.Endpoint, `name = "taken"`),
			ExpectError: expectError("Cannot Create Workspace", `workspace "taken" already exists`, "terraform import", "/workspaces/taken"),
		}},
	})
}

func TestAccWorkspace_InvalidName(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	var steps []resource.TestStep
	for _, name := range []string{
		"ab",                                 // too short
		"team a",                             // space
		"team.a",                             // dot
		"-team",                              // starts with a dash
		"abcdefghijklmnopqrstuvwxyz01234567", // 34 characters
	} {
		steps = append(steps, resource.TestStep{
			Config:      testAccWorkspaceConfig(e.Endpoint, fmt.Sprintf("name = %q", name)),
			PlanOnly:    true,
			ExpectError: expectError("Invalid Workspace Name", fmt.Sprintf("invalid workspace name %q", name), "3 to 33 characters"),
		})
	}
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, Steps: steps})
}

func TestAccWorkspace_UnknownLocation(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{Locations: []string{"local", "lab"}})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccWorkspaceConfig(e.Endpoint, `
  name     = "team-l"
  location = "mars"
`),
			PlanOnly:    true,
			ExpectError: expectError("Location Not Served", `"mars"`, "one of: local, lab"),
		}},
	})
}

// The default location must be served too: an engine that serves only "lab" refuses a
// workspace that leaves location out.
func TestAccWorkspace_DefaultLocationNotServed(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{Locations: []string{"lab"}})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      testAccWorkspaceConfig(e.Endpoint, `name = "team-l"`),
			PlanOnly:    true,
			ExpectError: expectError("Location Not Served", `"local"`, "one of: lab"),
		}},
	})
}

func TestAccWorkspace_InvalidQuotas(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	tests := []struct {
		quotas string
		want   *regexp.Regexp
	}{
		{`{ standardNCSv3Family = -4 }`, expectError("Invalid Workspace Quota", "quota for standardNCSv3Family must be a vCPU count of 0 or more, got -4")},
		{`{ standardFooFamily = 8 }`, expectError("Invalid Workspace Quota", `unknown VM family "standardFooFamily"`, "allowed families:", "standardDSv2Family", "standardNCSv3Family")},
		{`{ standardncsv3family = 8 }`, expectError("Invalid Workspace Quota", `VM family "standardncsv3family" must be spelled "standardNCSv3Family"`)},
	}
	var steps []resource.TestStep
	for _, tt := range tests {
		steps = append(steps, resource.TestStep{
			Config:      testAccWorkspaceConfig(e.Endpoint, "name = \"team-q\"\nquotas = "+tt.quotas),
			PlanOnly:    true,
			ExpectError: tt.want,
		})
	}
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, Steps: steps})
}
