package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
)

const testAccScheduleAddr = "mlcompute_schedule.test"

// scheduleJobYAML is a serverless command job with its code in src.
const scheduleJobYAML = `command: python train.py
code: src
compute: serverless
resources:
  instance_type: Standard_DS3_v2
`

// testAccScheduleConfig is the provider, a workspace "sched" and one schedule "nightly"
// of scheduleJobYAML, its files in base, with the given extra attributes.
func testAccScheduleConfig(endpoint, base, body string) string {
	return testAccWorkspaceConfig(endpoint, `name = "sched"`) + fmt.Sprintf(`
resource "mlcompute_schedule" "test" {
  name         = "nightly"
  workspace_id = mlcompute_workspace.test.id
  create_job   = <<-EOT
%sEOT
  base_path    = %q
%s
}
`, scheduleJobYAML, base, body)
}

func jobScheduleValue(p tfjsonpath.Path, check knownvalue.Check) statecheck.StateCheck {
	return statecheck.ExpectKnownValue(testAccScheduleAddr, p, check)
}

// writeTrainPy writes base/src/train.py, its modification time at mtime.
func writeTrainPy(t *testing.T, base, content string, mtime time.Time) {
	t.Helper()
	p := filepath.Join(base, "src", "train.py")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// waitSchedule waits until the engine's schedule satisfies cond: a tick fires in the
// engine's own loop once the test moved its clock.
func waitSchedule(t *testing.T, c *client.Client, cond func(*api.JobSchedule) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := c.GetSchedule(context.Background(), "sched", "nightly")
		if err == nil && cond(s) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("schedule never reached the state: %+v, %v", s, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Create, an edit of a code file planned as an update in place (a new content_hash),
// import, and a tick on the engine's fake clock: the run named for the tick shows as
// last_run_job on refresh, and the plan stays empty.
func TestAccSchedule_CreateUpdateImportFire(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{Fake: fake.Options{Start: func(string, driver.TaskSpec) fake.Outcome {
		return fake.Outcome{Exited: true}
	}}})
	base := t.TempDir()
	mtime := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	writeTrainPy(t, base, "print('v1')\n", mtime)
	hash := statecheck.CompareValue(compare.ValuesDiffer())
	cron := `
  trigger = {
    type       = "cron"
    expression = "0 2 * * *"
    time_zone  = "UTC"
  }
`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccScheduleConfig(e.Endpoint, base, cron),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccScheduleAddr, plancheck.ResourceActionCreate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				jobScheduleValue(tfjsonpath.New("id"), knownvalue.StringExact("/workspaces/sched/schedules/nightly")),
				jobScheduleValue(tfjsonpath.New("next_run_time"), knownvalue.StringExact("2026-01-06T02:00:00Z")),
				jobScheduleValue(tfjsonpath.New("enabled"), knownvalue.Bool(true)),
				jobScheduleValue(tfjsonpath.New("overlap"), knownvalue.StringExact("forbid")),
				jobScheduleValue(tfjsonpath.New("catch_up"), knownvalue.StringExact("latest")),
				jobScheduleValue(tfjsonpath.New("last_run_job"), knownvalue.StringExact("")),
				jobScheduleValue(tfjsonpath.New("content_hash"), knownvalue.StringRegexp(hex64)),
				hash.AddStateValue(testAccScheduleAddr, tfjsonpath.New("content_hash")),
			},
			Check: func(*terraform.State) error {
				s, err := c.GetSchedule(context.Background(), "sched", "nightly")
				if err != nil {
					return err
				}
				if s.Job.SnapshotID == "" || s.Job.Compute != "serverless" {
					return fmt.Errorf("engine's job %+v; want the code snapshotted, on serverless", s.Job)
				}
				return nil
			},
		}, {
			// An edit of train.py alone: an update in place, with a new content_hash.
			PreConfig: func() { writeTrainPy(t, base, "print('v2')\n", mtime.Add(time.Hour)) },
			Config:    testAccScheduleConfig(e.Endpoint, base, cron),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccScheduleAddr, plancheck.ResourceActionUpdate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{hash.AddStateValue(testAccScheduleAddr, tfjsonpath.New("content_hash"))},
		}, {
			Config: testAccScheduleConfig(e.Endpoint, base, cron+`  overlap = "allow"
  catch_up = "none"
`),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccScheduleAddr, plancheck.ResourceActionUpdate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				jobScheduleValue(tfjsonpath.New("overlap"), knownvalue.StringExact("allow")),
				jobScheduleValue(tfjsonpath.New("catch_up"), knownvalue.StringExact("none")),
			},
		}, {
			ResourceName:      testAccScheduleAddr,
			ImportState:       true,
			ImportStateId:     "/workspaces/sched/schedules/nightly",
			ImportStateVerify: true,
		}, {
			// The tick at 02:00 fires in the engine; a refresh shows its run and plans nothing.
			PreConfig: func() {
				e.Clock.SetTime(time.Date(2026, 1, 6, 2, 0, 0, 0, time.UTC))
				waitSchedule(t, c, func(s *api.JobSchedule) bool { return s.LastRunStatus == api.JobCompleted })
				waitComputesGone(t, c, "sched")
			},
			Config: testAccScheduleConfig(e.Endpoint, base, cron+`  overlap = "allow"
  catch_up = "none"
`),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			ConfigStateChecks: []statecheck.StateCheck{
				jobScheduleValue(tfjsonpath.New("last_run_job"), knownvalue.StringExact("nightly-20260106T020000Z")),
				jobScheduleValue(tfjsonpath.New("last_run_status"), knownvalue.StringExact(api.JobCompleted)),
				jobScheduleValue(tfjsonpath.New("next_run_time"), knownvalue.StringExact("2026-01-07T02:00:00Z")),
			},
		}},
	})
}

// waitComputesGone waits until the serverless compute of a finished run is released, so
// the workspace can be destroyed.
func waitComputesGone(t *testing.T, c *client.Client, ws string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := c.ListComputes(context.Background(), ws)
		if err == nil && len(list) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("computes of finished runs never released: %+v, %v", list, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Each bad input fails the plan, naming the attribute and the values allowed.
func TestAccSchedule_BadInput(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	base := t.TempDir()
	writeTrainPy(t, base, "print('v1')\n", time.Now())
	config := func(trigger, extra string) string {
		return testAccScheduleConfig(e.Endpoint, base, "  trigger = {\n"+trigger+"\n  }\n"+extra)
	}
	step := func(cfg string, phrases ...string) resource.TestStep {
		return resource.TestStep{Config: cfg, PlanOnly: true, ExpectError: expectError(phrases...)}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			step(config(`type = "cron"
    expression = "0 2 * *"`, ""), "Invalid Schedule Trigger", "trigger.expression", "minute hour day-of-month month day-of-week"),
			step(config(`type = "cron"
    expression = "0 2 * * *"
    time_zone = "Mars/Olympus"`, ""), "trigger.time_zone", `"Mars/Olympus" is not an IANA or Windows time zone name`),
			step(config(`type = "recurrence"
    frequency = "fortnight"
    interval = 1`, ""), "trigger.frequency", `value must be one of: ["minute" "hour" "day" "week" "month"]`),
			step(config(`type = "recurrence"
    frequency = "day"
    interval = 1
    start_time = "2026-04-01T00:00:00Z"
    end_time = "2026-03-01T00:00:00Z"`, ""), "trigger.end_time", "must be after start_time"),
			step(config(`type = "cron"
    expression = "0 2 * * *"`, `  overlap = "queue"`), "overlap", `value must be one of: ["allow" "forbid" "replace"]`),
			step(config(`type = "cron"
    expression = "0 2 * * *"`, `  catch_up = "all"`), "catch_up", `value must be one of: ["none" "latest"]`),
			step(testAccWorkspaceConfig(e.Endpoint, `name = "sched"`)+`
resource "mlcompute_schedule" "test" {
  name         = "nightly"
  workspace_id = mlcompute_workspace.test.id
  trigger      = { type = "cron", expression = "0 2 * * *" }
  create_job   = "command: python train.py\ncompute: cpu\nresources:\n  instance_cont: 2\n"
}
`, "Invalid Job YAML", "line 4: resources.instance_cont", `unknown key "instance_cont"`),
			step(testAccWorkspaceConfig(e.Endpoint, `name = "sched"`)+fmt.Sprintf(`
resource "mlcompute_schedule" "test" {
  name         = "nightly"
  workspace_id = mlcompute_workspace.test.id
  trigger      = { type = "cron", expression = "0 2 * * *" }
  create_job   = "command: python train.py\ncode: missing\ncompute: cpu\n"
  base_path    = %q
}
`, base), "Cannot Snapshot Job Files", "missing"),
		},
	})
}
