package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
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

const testAccInstanceAddr = "mlcompute_compute_instance.test"

// testAccInstanceConfig is the provider block, a workspace "lab" and an instance "alice" in
// it with the given body.
func testAccInstanceConfig(endpoint, body string) string {
	return testAccWorkspaceConfig(endpoint, `name = "lab"`) + `
resource "mlcompute_compute_instance" "test" {
  workspace_id = mlcompute_workspace.test.id
  name         = "alice"
` + body + "\n}\n"
}

// testAccDevInstance is the instance "alice" of the given size with extra attributes.
func testAccDevInstance(endpoint, size, extra string) string {
	return testAccInstanceConfig(endpoint, fmt.Sprintf("  vm_size = %q\n%s", size, extra))
}

// instanceValue is a state check of one attribute of the test instance; nested attributes
// are written with dots, list indices as numbers ("schedules.0.cron").
func instanceValue(attr string, check knownvalue.Check) statecheck.StateCheck {
	return statecheck.ExpectKnownValue(testAccInstanceAddr, attrPath(attr), check)
}

// lastOperation checks last_operation; an empty at skips the time.
func lastOperation(name, status, trigger, at string) statecheck.StateCheck {
	var timeCheck knownvalue.Check = knownvalue.StringRegexp(regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`))
	if at != "" {
		timeCheck = knownvalue.StringExact(at)
	}
	return instanceValue("last_operation", knownvalue.ObjectExact(map[string]knownvalue.Check{
		"name": knownvalue.StringExact(name), "status": knownvalue.StringExact(status),
		"trigger": knownvalue.StringExact(trigger), "time": timeCheck,
	}))
}

// scheduleValue checks one entry of schedules.
func scheduleValue(action, cron, timeZone string, enabled bool) knownvalue.Check {
	return knownvalue.ObjectExact(map[string]knownvalue.Check{
		"action": knownvalue.StringExact(action), "cron": knownvalue.StringExact(cron),
		"time_zone": knownvalue.StringExact(timeZone), "enabled": knownvalue.Bool(enabled),
	})
}

// setupExit is how finishSetupScripts ends one setup script: the stage ("creation" or
// "startup"), the output the script printed and its exit code.
type setupExit struct {
	stage  string
	output string
	code   int
}

// finishSetupScripts plays the setup scripts of the test's one instance: for each exit in
// order, it waits until the engine runs that stage's script on the fake driver (a task
// "setup-<start>-<stage>"), writes the output and ends it with the exit code. The fake
// driver never ends a task by itself, and the provider's create (or resizing update) waits
// for the scripts, so this runs on a goroutine, started in the step's PreConfig. It stops
// when the test ends; a script that never starts fails the step's own checks.
func finishSetupScripts(t *testing.T, e *enginetest.Engine, exits ...setupExit) {
	t.Helper()
	ctx := t.Context()
	var wg sync.WaitGroup
	wg.Add(1)
	t.Cleanup(wg.Wait) // t.Context is done before cleanups run
	go func() {
		defer wg.Done()
		for _, x := range exits {
			node, task, ok := "", "", false
			for !ok {
				for _, nt := range e.Driver.RunningTasks() {
					n, tk, _ := strings.Cut(nt, "/")
					if strings.HasPrefix(tk, "setup-") && strings.HasSuffix(tk, "-"+x.stage) {
						node, task, ok = n, tk, true
					}
				}
				if !ok {
					select {
					case <-ctx.Done():
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
			}
			if x.output != "" {
				e.Driver.AppendOutput(node, task, []byte(x.output))
			}
			e.Driver.FinishTask(node, task, x.code)
		}
	}()
}

// instanceAction starts or stops the instance as a person would with 'mlcompute compute
// start|stop', and waits until the engine has done it.
func instanceAction(t *testing.T, c *client.Client, name, action, want string) {
	t.Helper()
	if _, err := c.InstanceAction(context.Background(), "lab", name, action); err != nil {
		t.Fatal(err)
	}
	waitForCompute(t, c, "lab", name, "state "+want, func(got *api.Compute) bool {
		return got.State == want && got.LastOperation != nil && got.LastOperation.Status != "InProgress"
	})
}

// noNodeStarted checks that the instance is stopped and has no node.
func noNodeStarted(e *enginetest.Engine, c *client.Client, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		got, err := c.GetCompute(context.Background(), "lab", name)
		if err != nil {
			return err
		}
		if got.State != api.InstanceStopped || len(got.Nodes) != 0 || len(e.Driver.Nodes()) != 0 {
			return fmt.Errorf("the apply started the stopped instance: state %s, nodes %v, driver nodes %v", got.State, got.Nodes, e.Driver.Nodes())
		}
		return nil
	}
}

func TestAccComputeInstance_Basic(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccClusterDestroyed(e, c, "lab", "alice"),
		Steps: []resource.TestStep{{
			Config: testAccDevInstance(e.Endpoint, "Standard_DS3_v2", `  idle_time_before_shutdown = "PT30M"`),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccInstanceAddr, plancheck.ResourceActionCreate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				instanceValue("id", knownvalue.StringExact("/workspaces/lab/computes/alice")),
				instanceValue("name", knownvalue.StringExact("alice")),
				instanceValue("workspace_id", knownvalue.StringExact("/workspaces/lab")),
				instanceValue("vm_size", knownvalue.StringExact("Standard_DS3_v2")),
				instanceValue("idle_time_before_shutdown", knownvalue.StringExact("PT30M")),
				instanceValue("schedules", knownvalue.ListExact([]knownvalue.Check{})),
				instanceValue("setup_scripts", knownvalue.Null()),
				instanceValue("description", knownvalue.StringExact("")),
				instanceValue("tags", emptyMap),
				// Create waited for the instance to run.
				instanceValue("state", knownvalue.StringExact("Running")),
				// The engine's fake clock starts at 2026-01-05 09:00 UTC.
				lastOperation("Create", "Succeeded", "User", "2026-01-05T09:00:00Z"),
				instanceValue("created_on", knownvalue.StringExact("2026-01-05T09:00:00Z")),
				instanceValue("timeouts", knownvalue.Null()),
			},
			Check: engineCompute(c, "lab", "alice", func(got *api.Compute) error {
				if got.Type != api.TypeComputeInstance || got.State != api.InstanceRunning || len(got.Nodes) != 1 ||
					got.Instance == nil || got.Instance.IdleTimeBeforeShutdown != "PT30M" {
					return fmt.Errorf("engine holds %+v", got)
				}
				return nil
			}),
		}, {
			ResourceName:            testAccInstanceAddr,
			ImportState:             true,
			ImportStateId:           "/workspaces/lab/computes/alice",
			ImportStateVerify:       true,
			ImportStateVerifyIgnore: []string{"timeouts"},
		}},
	})
}

// Every argument but name and workspace_id changes in place, one at a time; the instance
// is never replaced (created_on stays) and keeps running.
func TestAccComputeInstance_UpdateInPlace(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	createdOn := statecheck.CompareValue(compare.ValuesSame())
	update := updatedInPlace(testAccInstanceAddr)
	engine := func(check func(*api.Compute) error) resource.TestCheckFunc {
		return engineCompute(c, "lab", "alice", check)
	}
	const twoSchedules = `  schedules = [
    { action = "Start", cron = "0 8 * * 1-5" },
    { action = "Stop", cron = "0 19 * * 1-5" },
  ]`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccClusterDestroyed(e, c, "lab", "alice"),
		Steps: []resource.TestStep{{
			Config: testAccDevInstance(e.Endpoint, "Standard_DS3_v2", `  idle_time_before_shutdown = "PT30M"`),
			ConfigStateChecks: []statecheck.StateCheck{
				createdOn.AddStateValue(testAccInstanceAddr, tfjsonpath.New("created_on")),
			},
		}, {
			// A new size resizes in place: stop, resize, start again (it was running).
			PreConfig:        func() { e.Clock.Step(20 * time.Minute) }, // less than the idle time
			Config:           testAccDevInstance(e.Endpoint, "Standard_DS11_v2", `  idle_time_before_shutdown = "PT30M"`),
			ConfigPlanChecks: update,
			ConfigStateChecks: []statecheck.StateCheck{
				instanceValue("vm_size", knownvalue.StringExact("Standard_DS11_v2")),
				instanceValue("state", knownvalue.StringExact("Running")),
				lastOperation("Resize", "Succeeded", "User", "2026-01-05T09:20:00Z"),
				createdOn.AddStateValue(testAccInstanceAddr, tfjsonpath.New("created_on")),
			},
			Check: engine(func(got *api.Compute) error {
				if got.VMSize != "Standard_DS11_v2" || got.State != api.InstanceRunning || len(got.Nodes) != 1 {
					return fmt.Errorf("engine holds %+v after the resize", got)
				}
				return nil
			}),
		}, {
			// Another spelling of the same size is an update of the spelling alone.
			Config:           testAccDevInstance(e.Endpoint, "standard_ds11_v2", `  idle_time_before_shutdown = "PT30M"`),
			ConfigPlanChecks: update,
			ConfigStateChecks: []statecheck.StateCheck{
				instanceValue("vm_size", knownvalue.StringExact("standard_ds11_v2")),
				lastOperation("Resize", "Succeeded", "User", "2026-01-05T09:20:00Z"),
			},
		}, {
			Config:           testAccDevInstance(e.Endpoint, "Standard_DS11_v2", `  idle_time_before_shutdown = "PT2H"`),
			ConfigPlanChecks: update,
			ConfigStateChecks: []statecheck.StateCheck{
				instanceValue("idle_time_before_shutdown", knownvalue.StringExact("PT2H")),
				instanceValue("state", knownvalue.StringExact("Running")),
				createdOn.AddStateValue(testAccInstanceAddr, tfjsonpath.New("created_on")),
			},
			Check: engine(func(got *api.Compute) error {
				if got.Instance.IdleTimeBeforeShutdown != "PT2H" {
					return fmt.Errorf("engine idle time %q", got.Instance.IdleTimeBeforeShutdown)
				}
				return nil
			}),
		}, {
			// Schedules: the engine fills in time_zone and enabled, and the plan stays empty.
			Config:           testAccDevInstance(e.Endpoint, "Standard_DS11_v2", twoSchedules),
			ConfigPlanChecks: update,
			ConfigStateChecks: []statecheck.StateCheck{
				instanceValue("idle_time_before_shutdown", knownvalue.Null()),
				instanceValue("schedules", knownvalue.ListExact([]knownvalue.Check{
					scheduleValue("Start", "0 8 * * 1-5", "UTC", true),
					scheduleValue("Stop", "0 19 * * 1-5", "UTC", true),
				})),
				createdOn.AddStateValue(testAccInstanceAddr, tfjsonpath.New("created_on")),
			},
			Check: engine(func(got *api.Compute) error {
				if s := got.Instance.Schedules; len(s) != 2 || s[1].Cron != "0 19 * * 1-5" || got.Instance.IdleTimeBeforeShutdown != "" {
					return fmt.Errorf("engine settings %+v", got.Instance)
				}
				return nil
			}),
		}, {
			Config: testAccDevInstance(e.Endpoint, "Standard_DS11_v2", `  schedules = [
    { action = "Stop", cron = "30 18 * * 1-5", time_zone = "Europe/Berlin" },
    { action = "Start", cron = "0 8 * * 1-5", enabled = false },
  ]`),
			ConfigPlanChecks: update,
			ConfigStateChecks: []statecheck.StateCheck{
				instanceValue("schedules", knownvalue.ListExact([]knownvalue.Check{
					scheduleValue("Stop", "30 18 * * 1-5", "Europe/Berlin", true),
					scheduleValue("Start", "0 8 * * 1-5", "UTC", false),
				})),
			},
			Check: engine(func(got *api.Compute) error {
				if s := got.Instance.Schedules; len(s) != 2 || s[0].TimeZone != "Europe/Berlin" || s[1].IsEnabled() {
					return fmt.Errorf("engine schedules %+v", s)
				}
				return nil
			}),
		}, {
			Config: testAccDevInstance(e.Endpoint, "Standard_DS11_v2", `
  description = "notebooks"
  tags        = { owner = "alice", env = "dev" }
`),
			ConfigPlanChecks: update,
			ConfigStateChecks: []statecheck.StateCheck{
				instanceValue("schedules", knownvalue.ListExact([]knownvalue.Check{})),
				instanceValue("description", knownvalue.StringExact("notebooks")),
				instanceValue("tags", knownvalue.MapExact(map[string]knownvalue.Check{
					"owner": knownvalue.StringExact("alice"), "env": knownvalue.StringExact("dev"),
				})),
				createdOn.AddStateValue(testAccInstanceAddr, tfjsonpath.New("created_on")),
			},
			Check: engine(func(got *api.Compute) error {
				if got.Description != "notebooks" || got.Tags["owner"] != "alice" || len(got.Instance.Schedules) != 0 {
					return fmt.Errorf("engine holds %+v", got)
				}
				return nil
			}),
		}, {
			// Removing the optional arguments clears them in place.
			Config:           testAccDevInstance(e.Endpoint, "Standard_DS11_v2", ""),
			ConfigPlanChecks: update,
			ConfigStateChecks: []statecheck.StateCheck{
				instanceValue("description", knownvalue.StringExact("")),
				instanceValue("tags", emptyMap),
				instanceValue("state", knownvalue.StringExact("Running")),
				createdOn.AddStateValue(testAccInstanceAddr, tfjsonpath.New("created_on")),
			},
		}, {
			ResourceName:            testAccInstanceAddr,
			ImportState:             true,
			ImportStateVerify:       true,
			ImportStateVerifyIgnore: []string{"timeouts"},
		}},
	})
}

// Setup scripts run at creation (creation, then startup) and create waits for them; new
// scripts are recorded in place without a restart; a resize starts the instance again,
// which runs the startup script alone, and the update waits for it.
func TestAccComputeInstance_SetupScripts(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	scripts := func(size, creation, startupTimeout string) string {
		return testAccDevInstance(e.Endpoint, size, fmt.Sprintf(`
  idle_time_before_shutdown = "PT1H"
  setup_scripts = {
    creation_script = { inline = %q }
    startup_script  = { inline = "echo started", timeout = %q }
  }
`, creation, startupTimeout))
	}
	scriptsValue := func(creation, startupTimeout string) statecheck.StateCheck {
		return instanceValue("setup_scripts", knownvalue.ObjectExact(map[string]knownvalue.Check{
			"creation_script": knownvalue.ObjectExact(map[string]knownvalue.Check{
				"inline": knownvalue.StringExact(creation), "timeout": knownvalue.StringExact("PT5M"),
			}),
			"startup_script": knownvalue.ObjectExact(map[string]knownvalue.Check{
				"inline": knownvalue.StringExact("echo started"), "timeout": knownvalue.StringExact(startupTimeout),
			}),
		}))
	}
	ran := func(want ...string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			var got []string
			for _, k := range e.Driver.CallsTo("StartTask") {
				if _, task, _ := strings.Cut(k, "/"); strings.HasPrefix(task, "setup-") {
					got = append(got, task)
				}
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				return fmt.Errorf("setup scripts run: %v; want %v", got, want)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccClusterDestroyed(e, c, "lab", "alice"),
		Steps: []resource.TestStep{{
			PreConfig: func() {
				finishSetupScripts(t, e, setupExit{stage: "creation"}, setupExit{stage: "startup"})
			},
			Config: scripts("Standard_DS3_v2", "pip install torch", "PT10M"),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				scriptsValue("pip install torch", "PT10M"),
				instanceValue("state", knownvalue.StringExact("Running")),
				lastOperation("Create", "Succeeded", "User", ""),
			},
			Check: ran("setup-1-creation", "setup-1-startup"),
		}, {
			// New scripts take effect at the next start: nothing runs now.
			Config:           scripts("Standard_DS3_v2", "pip install torch==2.5", "PT5M"),
			ConfigPlanChecks: updatedInPlace(testAccInstanceAddr),
			ConfigStateChecks: []statecheck.StateCheck{
				scriptsValue("pip install torch==2.5", "PT5M"),
				instanceValue("state", knownvalue.StringExact("Running")),
			},
			Check: ran("setup-1-creation", "setup-1-startup"),
		}, {
			PreConfig:        func() { finishSetupScripts(t, e, setupExit{stage: "startup"}) },
			Config:           scripts("Standard_F4s_v2", "pip install torch==2.5", "PT5M"),
			ConfigPlanChecks: updatedInPlace(testAccInstanceAddr),
			ConfigStateChecks: []statecheck.StateCheck{
				instanceValue("vm_size", knownvalue.StringExact("Standard_F4s_v2")),
				instanceValue("state", knownvalue.StringExact("Running")),
				lastOperation("Resize", "Succeeded", "User", ""),
			},
			Check: ran("setup-1-creation", "setup-1-startup", "setup-2-startup"),
		}, {
			// Removing the scripts is an update too.
			Config:           testAccDevInstance(e.Endpoint, "Standard_F4s_v2", `  idle_time_before_shutdown = "PT1H"`),
			ConfigPlanChecks: updatedInPlace(testAccInstanceAddr),
			ConfigStateChecks: []statecheck.StateCheck{
				instanceValue("setup_scripts", knownvalue.Null()),
			},
		}},
	})
}

// A creation script that fails fails the apply with the script's output; the instance is
// kept in state (tainted), never leaked, and the next apply with a fixed script replaces it.
func TestAccComputeInstance_SetupFailed(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	config := func(script string) string {
		return testAccDevInstance(e.Endpoint, "Standard_DS3_v2", fmt.Sprintf(`
  idle_time_before_shutdown = "PT1H"
  setup_scripts = {
    creation_script = { inline = %q }
  }
`, script))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccClusterDestroyed(e, c, "lab", "alice"),
		Steps: []resource.TestStep{{
			PreConfig: func() {
				finishSetupScripts(t, e, setupExit{stage: "creation", code: 127,
					output: "Collecting torch\nsh: 1: pip: not found\n"})
			},
			Config: config("pip install torch"),
			ExpectError: expectError("Compute Instance Setup Failed", "a setup script failed",
				"state SetupFailed", "tainted", "creation_script exited with status 127", "pip: not found"),
		}, {
			PreConfig: func() {
				got, err := c.GetCompute(context.Background(), "lab", "alice")
				if err != nil || got.State != api.InstanceSetupFailed {
					t.Fatalf("after the failed apply the engine holds %+v, %v; want the instance in SetupFailed", got, err)
				}
				finishSetupScripts(t, e, setupExit{stage: "creation"})
			},
			Config: config("pip3 install torch"),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccInstanceAddr, plancheck.ResourceActionDestroyBeforeCreate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				instanceValue("state", knownvalue.StringExact("Running")),
				lastOperation("Create", "Succeeded", "User", ""),
			},
		}},
	})
}

// A create whose wait outlasts the create timeout (a creation script that does not end)
// leaves the instance tracked, never untracked: the error names the timeout, state holds
// the instance (tainted), and the next apply replaces it.
func TestAccComputeInstance_CreateTimeout(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	config := func(timeouts string) string {
		return testAccDevInstance(e.Endpoint, "Standard_DS3_v2", `
  idle_time_before_shutdown = "PT1H"
  setup_scripts             = { creation_script = { inline = "sleep 600" } }
`+timeouts)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccClusterDestroyed(e, c, "lab", "alice"),
		Steps: []resource.TestStep{{
			Config:      config(`  timeouts = { create = "1s" }`),
			ExpectError: expectError("Compute Instance Create Timed Out", "after 1s, the create timeout", `timeouts = { create = "2s" }`),
		}, {
			PreConfig: func() {
				got, err := c.GetCompute(context.Background(), "lab", "alice")
				if err != nil || got.State != api.InstanceCreating {
					t.Fatalf("after the timeout the engine holds %+v, %v; want the instance still Creating", got, err)
				}
				// The first script is the old instance's, which the engine kills when
				// Terraform replaces it; the second, the new instance's.
				finishSetupScripts(t, e, setupExit{stage: "creation"}, setupExit{stage: "creation"})
			},
			Config: config(""),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccInstanceAddr, plancheck.ResourceActionDestroyBeforeCreate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				instanceValue("state", knownvalue.StringExact("Running")),
				instanceValue("timeouts", knownvalue.Null()),
			},
		}},
	})
}

// Idle shutdown stops the instance: the plan stays empty, refresh shows it Stopped, and an
// apply that changes an argument does not start it again.
func TestAccComputeInstance_IdleShutdownNoDrift(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	config := func(description string) string {
		return testAccDevInstance(e.Endpoint, "Standard_DS3_v2", fmt.Sprintf(`
  idle_time_before_shutdown = "PT15M"
  description               = %q
`, description))
	}
	stoppedByIdle := []statecheck.StateCheck{
		instanceValue("state", knownvalue.StringExact("Stopped")),
		lastOperation("Stop", "Succeeded", "IdleShutdown", "2026-01-05T09:16:00Z"),
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccClusterDestroyed(e, c, "lab", "alice"),
		Steps: []resource.TestStep{{
			Config: config("a"),
			ConfigStateChecks: []statecheck.StateCheck{
				instanceValue("state", knownvalue.StringExact("Running")),
			},
		}, {
			PreConfig: func() {
				e.Clock.Step(16 * time.Minute)
				waitForCompute(t, c, "lab", "alice", "stopped for idleness", func(got *api.Compute) bool {
					return got.State == api.InstanceStopped && got.LastOperation.Status == "Succeeded"
				})
			},
			Config: config("a"),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: stoppedByIdle,
		}, {
			Config:            config("b"),
			ConfigPlanChecks:  updatedInPlace(testAccInstanceAddr),
			ConfigStateChecks: append(stoppedByIdle, instanceValue("description", knownvalue.StringExact("b"))),
			Check:             noNodeStarted(e, c, "alice"),
		}},
	})
}

// A schedule stops the instance at its cron time: no drift, and a later apply leaves it
// stopped.
func TestAccComputeInstance_ScheduleStopNoDrift(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	config := func(description string) string {
		return testAccDevInstance(e.Endpoint, "Standard_DS3_v2", fmt.Sprintf(`
  schedules   = [{ action = "Stop", cron = "0 10 * * 1-5" }]
  description = %q
`, description))
	}
	stoppedBySchedule := []statecheck.StateCheck{
		instanceValue("state", knownvalue.StringExact("Stopped")),
		lastOperation("Stop", "Succeeded", "Schedule", "2026-01-05T10:00:00Z"),
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccClusterDestroyed(e, c, "lab", "alice"),
		Steps: []resource.TestStep{{
			Config: config("a"),
		}, {
			PreConfig: func() {
				e.Clock.Step(time.Hour) // 2026-01-05 is a Monday: 10:00 UTC fires
				waitForCompute(t, c, "lab", "alice", "stopped by its schedule", func(got *api.Compute) bool {
					return got.State == api.InstanceStopped && got.LastOperation.Status == "Succeeded"
				})
			},
			Config: config("a"),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: stoppedBySchedule,
		}, {
			Config:            config("b"),
			ConfigPlanChecks:  updatedInPlace(testAccInstanceAddr),
			ConfigStateChecks: append(stoppedBySchedule, instanceValue("description", knownvalue.StringExact("b"))),
			Check:             noNodeStarted(e, c, "alice"),
		}},
	})
}

// An instance a person stopped stays stopped through applies, a resize included (it takes
// the new size at its next start); started again, it shows Running without drift.
func TestAccComputeInstance_StoppedByUserNoDrift(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	config := func(size string) string {
		return testAccDevInstance(e.Endpoint, size, `  idle_time_before_shutdown = "PT1H"`)
	}
	empty := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccClusterDestroyed(e, c, "lab", "alice"),
		Steps: []resource.TestStep{{
			Config: config("Standard_DS3_v2"),
		}, {
			PreConfig:        func() { instanceAction(t, c, "alice", api.ActionStop, api.InstanceStopped) },
			Config:           config("Standard_DS3_v2"),
			ConfigPlanChecks: empty,
			ConfigStateChecks: []statecheck.StateCheck{
				instanceValue("state", knownvalue.StringExact("Stopped")),
				lastOperation("Stop", "Succeeded", "User", ""),
			},
		}, {
			Config:           config("Standard_DS4_v2"),
			ConfigPlanChecks: updatedInPlace(testAccInstanceAddr),
			ConfigStateChecks: []statecheck.StateCheck{
				instanceValue("vm_size", knownvalue.StringExact("Standard_DS4_v2")),
				instanceValue("state", knownvalue.StringExact("Stopped")),
			},
			Check: noNodeStarted(e, c, "alice"),
		}, {
			PreConfig:        func() { instanceAction(t, c, "alice", api.ActionStart, api.InstanceRunning) },
			Config:           config("Standard_DS4_v2"),
			ConfigPlanChecks: empty,
			ConfigStateChecks: []statecheck.StateCheck{
				instanceValue("state", knownvalue.StringExact("Running")),
				lastOperation("Start", "Succeeded", "User", ""),
			},
		}},
	})
}

// The engine's idle-shutdown policy (PT15M unless the operator lowers it) is checked at
// plan time, with the minimum the engine's status gives: the error names the policy and
// lands on idle_time_before_shutdown, nothing is created, and an update below the minimum
// fails the same way.
func TestAccComputeInstance_IdlePolicy(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	config := func(idle string) string {
		return testAccDevInstance(e.Endpoint, "Standard_DS3_v2", fmt.Sprintf(`  idle_time_before_shutdown = %q`, idle))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccClusterDestroyed(e, c, "lab", "alice"),
		Steps: []resource.TestStep{{
			Config: config("PT5M"),
			ExpectError: expectError("Idle Time Below The Engine's Minimum", `idle_time_before_shutdown = "PT5M"`,
				"at least PT15M idle", `idle_time_before_shutdown "PT5M" is below this engine's minimum of PT15M`,
				"mlcompute serve --min-idle-shutdown"),
		}, {
			Config: config("PT15M"),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccInstanceAddr, plancheck.ResourceActionCreate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
		}, {
			Config: config("PT10M"),
			ExpectError: expectError("Idle Time Below The Engine's Minimum",
				`idle_time_before_shutdown "PT10M" is below this engine's minimum of PT15M`),
		}},
	})
}

// The minimum is the engine's, not the default's: an engine whose operator raised it to
// PT2H refuses PT1H at plan time (PlanOnly: the plan itself fails), and one that lowered it
// to PT1M accepts PT5M and refuses PT30S, each naming the attribute and its minimum.
func TestAccComputeInstance_IdleMinimumAtPlan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name              string
		minimum           time.Duration
		accepted, refused string
		minimumISO        string
	}{
		{name: "raised", minimum: 2 * time.Hour, accepted: "PT2H", refused: "PT1H", minimumISO: "PT2H"},
		{name: "lowered", minimum: time.Minute, accepted: "PT5M", refused: "PT30S", minimumISO: "PT1M"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, c := testAccEngine(t, enginetest.Options{MinIdleShutdown: tc.minimum})
			config := func(idle string) string {
				return testAccDevInstance(e.Endpoint, "Standard_DS3_v2", fmt.Sprintf(`  idle_time_before_shutdown = %q`, idle))
			}
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				CheckDestroy:             testAccClusterDestroyed(e, c, "lab", "alice"),
				Steps: []resource.TestStep{{
					Config:   config(tc.refused),
					PlanOnly: true,
					ExpectError: expectError("Idle Time Below The Engine's Minimum",
						fmt.Sprintf(`idle_time_before_shutdown = %q`, tc.refused),
						fmt.Sprintf("Set idle_time_before_shutdown to %s or longer", tc.minimumISO)),
				}, {
					Config: config(tc.accepted),
					Check: engineCompute(c, "lab", "alice", func(got *api.Compute) error {
						if got.Instance.IdleTimeBeforeShutdown != tc.accepted {
							return fmt.Errorf("idle_time_before_shutdown in the engine = %q; want %q", got.Instance.IdleTimeBeforeShutdown, tc.accepted)
						}
						return nil
					}),
				}, {
					Config:   config(tc.refused),
					PlanOnly: true,
					ExpectError: expectError("Idle Time Below The Engine's Minimum",
						fmt.Sprintf(`idle_time_before_shutdown %q is below this engine's minimum of %s`, tc.refused, tc.minimumISO)),
				}},
			})
		})
	}
}

// Changes made outside Terraform show as drift and apply puts the configuration back; an
// instance deleted outside Terraform is created again.
func TestAccComputeInstance_Drift(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	ctx := context.Background()
	config := testAccDevInstance(e.Endpoint, "Standard_DS3_v2", `
  idle_time_before_shutdown = "PT1H"
  schedules                 = [{ action = "Stop", cron = "0 19 * * *" }]
`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: config,
		}, {
			PreConfig: func() {
				_, err := c.UpdateCompute(ctx, "lab", "alice", api.ComputeUpdate{
					Description: "changed by hand",
					Instance: &api.InstanceSettings{IdleTimeBeforeShutdown: "PT3H",
						Schedules: []api.Schedule{{Action: "Stop", Cron: "0 20 * * *"}}},
				})
				if err != nil {
					t.Fatal(err)
				}
			},
			Config:             config,
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
		}, {
			Config:           config,
			ConfigPlanChecks: updatedInPlace(testAccInstanceAddr),
			Check: engineCompute(c, "lab", "alice", func(got *api.Compute) error {
				if got.Description != "" || got.Instance.IdleTimeBeforeShutdown != "PT1H" || got.Instance.Schedules[0].Cron != "0 19 * * *" {
					return fmt.Errorf("apply did not restore the configuration: %+v %+v", got, got.Instance)
				}
				return nil
			}),
		}, {
			PreConfig: func() {
				if err := c.DeleteCompute(ctx, "lab", "alice"); err != nil {
					t.Fatal(err)
				}
			},
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccInstanceAddr, plancheck.ResourceActionCreate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
		}},
	})
}

func TestAccComputeInstance_ImportErrors(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	// force_destroy: the cluster made by hand is never in state.
	workspace := testAccWorkspaceConfig(e.Endpoint, "name = \"lab\"\nforce_destroy = true")
	config := workspace + `
resource "mlcompute_compute_instance" "test" {
  workspace_id = mlcompute_workspace.test.id
  name         = "cpu"
  vm_size      = "Standard_DS3_v2"
}`
	steps := []resource.TestStep{{Config: workspace}}
	for _, tt := range []struct {
		id   string
		want *regexp.Regexp
	}{
		{"alice", expectError("Invalid Compute Instance ID", "/workspaces/{workspace}/computes/{name}")},
		{"/workspaces/lab/onlineEndpoints/alice", expectError("Invalid Compute Instance ID")},
		{"/workspaces/lab/computes/alice", expectError("Cannot import non-existent remote object")},
		{"/workspaces/lab/computes/cpu", expectError("Not A Compute Instance", "/workspaces/lab/computes/cpu is a ComputeCluster")},
	} {
		steps = append(steps, resource.TestStep{
			Config:        config,
			ResourceName:  testAccInstanceAddr,
			ImportState:   true,
			ImportStateId: tt.id,
			ExpectError:   tt.want,
		})
	}
	steps[1].PreConfig = func() {
		_, err := c.CreateCompute(context.Background(), "lab", api.ComputeSpec{
			Name: "cpu", Type: api.TypeComputeCluster, VMSize: "Standard_DS3_v2", ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, Steps: steps})
}

// Every bad input the provider can judge alone is refused at plan time, on its attribute,
// with the engine's own words where the engine has the rule.
func TestAccComputeInstance_InvalidInputs(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	instance := func(extra string) string { return testAccDevInstance(e.Endpoint, "Standard_DS3_v2", extra) }
	tests := []struct {
		name   string
		config string
		want   *regexp.Regexp
	}{
		{"name ending in -digits", testAccWorkspaceConfig(e.Endpoint, `name = "lab"`) + `
resource "mlcompute_compute_instance" "test" {
  workspace_id = mlcompute_workspace.test.id
  name         = "alice-1"
  vm_size      = "Standard_DS3_v2"
}`, expectError("Invalid Compute Name", `invalid compute name "alice-1"`)},
		{"workspace_id malformed", testAccProviderConfig(e.Endpoint) + `
resource "mlcompute_compute_instance" "test" {
  workspace_id = "lab"
  name         = "alice"
  vm_size      = "Standard_DS3_v2"
}`, expectError("Invalid Workspace ID", `ID "lab" is not of the form /workspaces/{workspace}`)},
		{"unknown vm_size", testAccDevInstance(e.Endpoint, "Standard_Foo_v9", ""),
			expectError("Invalid VM Size", `unknown VM size "Standard_Foo_v9"`)},
		{"retired vm_size", testAccDevInstance(e.Endpoint, "standard_nc6", ""),
			expectError("Invalid VM Size", "retired on 2023-08-31")},
		{"idle time above P3D", instance(`idle_time_before_shutdown = "P4D"`),
			expectError("Invalid Idle Time Before Shutdown", `idle_time_before_shutdown "P4D" is out of range`, "P3D")},
		{"idle time of zero", instance(`idle_time_before_shutdown = "PT0S"`),
			expectError("Invalid Idle Time Before Shutdown", "would shut the instance down at once", "leave idle_time_before_shutdown unset")},
		{"idle time not ISO 8601", instance(`idle_time_before_shutdown = "30m"`),
			expectError("Invalid Idle Time Before Shutdown", `"30m" is not an ISO 8601 duration`)},
		{"five schedules", instance(`schedules = [
    { action = "Start", cron = "0 8 * * 1" },
    { action = "Start", cron = "0 8 * * 2" },
    { action = "Start", cron = "0 8 * * 3" },
    { action = "Start", cron = "0 8 * * 4" },
    { action = "Stop", cron = "0 19 * * *" },
  ]`), expectError("schedules", "must contain at most 4 elements, got: 5")},
		{"bad cron", instance(`schedules = [
    { action = "Start", cron = "0 8 * * 1-5" },
    { action = "Stop", cron = "0 25 * * *" },
  ]`), expectError("Invalid Schedule Cron Expression", `schedules[1].cron "0 25 * * *" is not a valid cron expression`, "expected five fields")},
		{"cron with six fields", instance(`schedules = [{ action = "Stop", cron = "0 0 19 * * *" }]`),
			expectError("Invalid Schedule Cron Expression", `schedules[0].cron "0 0 19 * * *" is not a valid cron expression`)},
		{"unknown time zone", instance(`schedules = [{ action = "Stop", cron = "0 19 * * *", time_zone = "Mars/Olympus" }]`),
			expectError("Invalid Schedule Time Zone", `schedules[0].time_zone "Mars/Olympus" is not a valid IANA time zone name`)},
		{"Local time zone", instance(`schedules = [{ action = "Stop", cron = "0 19 * * *", time_zone = "Local" }]`),
			expectError("Invalid Schedule Time Zone", "depends on the machine the engine runs on")},
		{"bad action", instance(`schedules = [{ action = "Restart", cron = "0 19 * * *" }]`),
			expectError("schedules[0].action", "must be one of", `"Start"`, `"Stop"`, `got: "Restart"`)},
		{"bad script timeout", instance(`setup_scripts = { startup_script = { inline = "true", timeout = "5m" } }`),
			expectError("Invalid Setup Script Timeout", `timeout "5m" is not an ISO 8601 duration`)},
		{"script timeout too long", instance(`setup_scripts = { creation_script = { inline = "true", timeout = "P2D" } }`),
			expectError("Invalid Setup Script Timeout", `timeout "P2D" is out of range`, "between PT1S and P1D")},
		{"script without inline", instance(`setup_scripts = { creation_script = { timeout = "PT1M" } }`),
			expectError(`attribute "inline" is required`)},
		{"bad timeout", instance(`timeouts = { create = "an hour" }`),
			expectError("Invalid Attribute Value Time Duration", `"an hour" must be a string containing`)},
	}
	var steps []resource.TestStep
	for _, tt := range tests {
		steps = append(steps, resource.TestStep{Config: tt.config, PlanOnly: true, ExpectError: tt.want})
	}
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, Steps: steps})
}

// Whether a workspace exists is the engine's to say: a well-formed workspace_id of a
// workspace that does not exist fails at apply, and nothing is left behind.
func TestAccComputeInstance_WorkspaceNotFound(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccProviderConfig(e.Endpoint) + `
resource "mlcompute_compute_instance" "test" {
  name         = "alice"
  workspace_id = "/workspaces/nowhere"
  vm_size      = "Standard_DS3_v2"
}`,
			ExpectError: expectError("Cannot Create Compute Instance", `workspace "nowhere" not found`),
		}},
	})
}

func TestComputeInstanceSchema(t *testing.T) {
	ctx := context.Background()
	var resp fwresource.SchemaResponse
	NewComputeInstanceResource().Schema(ctx, fwresource.SchemaRequest{}, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatalf("schema: %v", resp.Diagnostics)
	}
	if diags := resp.Schema.ValidateImplementation(ctx); diags.HasError() {
		t.Fatalf("schema implementation: %v", diags)
	}
	// Runtime attributes must never plan a change: computed only, no plan modifiers.
	for _, name := range []string{"state", "last_operation"} {
		a := resp.Schema.Attributes[name]
		if !a.IsComputed() || a.IsOptional() || a.IsRequired() {
			t.Errorf("%s must be computed only", name)
		}
		var n int
		switch a := a.(type) {
		case schema.StringAttribute:
			n = len(a.PlanModifiers)
		case schema.SingleNestedAttribute:
			n = len(a.PlanModifiers)
		}
		if n != 0 {
			t.Errorf("%s has plan modifiers; runtime attributes must have none", name)
		}
	}
	// Only name and workspace_id replace the instance; every other argument is updated in place.
	for name, a := range resp.Schema.Attributes {
		var replaces bool
		switch a := a.(type) {
		case schema.StringAttribute:
			replaces = len(a.PlanModifiers) > 0 && name != "id" && name != "created_on"
		case schema.ListNestedAttribute:
			replaces = len(a.PlanModifiers) > 0
		case schema.SingleNestedAttribute:
			replaces = len(a.PlanModifiers) > 0
		case schema.MapAttribute:
			replaces = len(a.PlanModifiers) > 0
		}
		if want := name == "name" || name == "workspace_id"; replaces != want {
			t.Errorf("%s: has plan modifiers %v, want %v", name, replaces, want)
		}
	}
}

// TestComputeInstanceModifyPlan runs ModifyPlan on plans built from the schema: the cost
// warning lands on idle_time_before_shutdown, and only a new size is checked against the
// catalog.
func TestComputeInstanceModifyPlan(t *testing.T) {
	ctx := context.Background()
	r := NewComputeInstanceResource().(*computeInstanceResource)
	var sr fwresource.SchemaResponse
	r.Schema(ctx, fwresource.SchemaRequest{}, &sr)
	object := func(size, idle string) tftypes.Value {
		v := map[string]any{"name": "alice", "workspace_id": "/workspaces/lab", "vm_size": size}
		if idle != "" {
			v["idle_time_before_shutdown"] = idle
		}
		return tfObject(t, sr.Schema.Type().TerraformType(ctx), v)
	}
	tests := []struct {
		name        string
		prior, plan tftypes.Value
		wantErr     string
		wantWarning bool
	}{
		{name: "create", plan: object("Standard_DS3_v2", "PT30M")},
		{name: "create without idle shutdown", plan: object("Standard_DS3_v2", ""), wantWarning: true},
		{name: "create with a retired size", plan: object("Standard_NC6", "PT30M"), wantErr: "retired on 2023-08-31"},
		{name: "unchanged retired size", prior: object("Standard_NC6", "PT30M"), plan: object("Standard_NC6", "PT1H")},
		{name: "retired size in another case", prior: object("Standard_NC6", "PT30M"), plan: object("standard_nc6", "PT30M")},
		{name: "new size is checked", prior: object("Standard_DS3_v2", "PT30M"), plan: object("Standard_Foo", "PT30M"), wantErr: "unknown VM size"},
		{name: "new size", prior: object("Standard_DS3_v2", "PT30M"), plan: object("Standard_DS11_v2", "PT30M")},
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
			if tt.wantErr != "" && !errs[0].(diag.DiagnosticWithPath).Path().Equal(path.Root("vm_size")) {
				t.Errorf("error not on vm_size: %v", errs[0])
			}
			if got := len(warns) == 1; got != tt.wantWarning {
				t.Fatalf("warnings %v; want a warning: %v", warns, tt.wantWarning)
			}
		})
	}
}

func TestNeverStopsWarning(t *testing.T) {
	ctx := context.Background()
	scheduleType := types.ObjectType{AttrTypes: scheduleAttrTypes}
	schedule := func(action types.String, enabled types.Bool) types.Object {
		return types.ObjectValueMust(scheduleAttrTypes, map[string]attr.Value{
			"action": action, "cron": types.StringValue("0 19 * * *"), "time_zone": types.StringValue("UTC"), "enabled": enabled,
		})
	}
	list := func(entries ...types.Object) types.List {
		vals := make([]attr.Value, len(entries))
		for i, e := range entries {
			vals[i] = e
		}
		return types.ListValueMust(scheduleType, vals)
	}
	stop, start := types.StringValue("Stop"), types.StringValue("Start")
	on, off := types.BoolValue(true), types.BoolValue(false)
	for _, tt := range []struct {
		name      string
		idle      types.String
		schedules types.List
		warn      bool
	}{
		{"nothing", types.StringNull(), list(), true},
		{"null schedules", types.StringNull(), types.ListNull(scheduleType), true},
		{"idle time", types.StringValue("PT30M"), list(), false},
		{"empty idle time", types.StringValue(""), list(), true},
		{"unknown idle time", types.StringUnknown(), list(), false},
		{"stop schedule", types.StringNull(), list(schedule(stop, on)), false},
		{"disabled stop schedule", types.StringNull(), list(schedule(stop, off)), true},
		{"start schedule only", types.StringNull(), list(schedule(start, on)), true},
		{"stop schedule of unknown enabled", types.StringNull(), list(schedule(stop, types.BoolUnknown())), false},
		{"schedule of unknown action", types.StringNull(), list(schedule(types.StringUnknown(), on)), false},
		{"unknown schedules", types.StringNull(), types.ListUnknown(scheduleType), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := neverStopsWarning(ctx, tt.idle, tt.schedules)
			if (d != nil) != tt.warn {
				t.Fatalf("got %v, want a warning: %v", d, tt.warn)
			}
			if d == nil {
				return
			}
			if d.Severity() != diag.SeverityWarning || !d.(diag.DiagnosticWithPath).Path().Equal(path.Root("idle_time_before_shutdown")) {
				t.Errorf("got %v; want a warning on idle_time_before_shutdown", d)
			}
			if !strings.Contains(d.Detail(), "Set idle_time_before_shutdown") || !strings.Contains(d.Detail(), `action = "Stop"`) {
				t.Errorf("detail gives no fix: %s", d.Detail())
			}
		})
	}
}

func TestInstanceFieldError(t *testing.T) {
	err := fmt.Errorf("updating: %w", api.Errorf(api.CodeInvalid, "instance.schedules.1.cron", "bad cron"))
	got := instanceFieldError(err)
	if f := api.FieldOf(got); f != "schedules.1.cron" {
		t.Errorf("field %q, want schedules.1.cron", f)
	}
	if api.CodeOf(got) != api.CodeInvalid || got.Error() != "bad cron" {
		t.Errorf("got %v (%s); want the same code and message", got, api.CodeOf(got))
	}
	var sr fwresource.SchemaResponse
	NewComputeInstanceResource().Schema(context.Background(), fwresource.SchemaRequest{}, &sr)
	if p, ok := fieldPath(sr.Schema.Type(), api.FieldOf(got)); !ok || !p.Equal(path.Root("schedules").AtListIndex(1).AtName("cron")) {
		t.Errorf("path %s, %v", p, ok)
	}
	other := api.Errorf(api.CodeInvalid, "vm_size", "bad size")
	if instanceFieldError(other) != error(other) {
		t.Errorf("an error of another field must be returned as it is")
	}
}

func TestInstanceSettled(t *testing.T) {
	op := func(status string) *api.Operation { return &api.Operation{Name: "Resize", Status: status} }
	for _, tt := range []struct {
		state string
		op    *api.Operation
		want  bool
	}{
		{api.InstanceCreating, op("InProgress"), false},
		{api.InstanceStarting, op("InProgress"), false},
		{api.InstanceResizing, op("InProgress"), false},
		{api.InstanceStopping, op("InProgress"), false},
		{api.InstanceRunning, op("InProgress"), false}, // a resize the engine has not begun
		{api.InstanceRunning, op("Succeeded"), true},
		{api.InstanceJobRunning, op("Succeeded"), true},
		{api.InstanceStopped, op("Succeeded"), true},
		{api.InstanceSetupFailed, op("Failed"), true},
		{api.InstanceRunning, nil, true},
	} {
		if got := instanceSettled(&api.Compute{State: tt.state, LastOperation: tt.op}); got != tt.want {
			t.Errorf("instanceSettled(%s, %+v) = %v, want %v", tt.state, tt.op, got, tt.want)
		}
	}
}
