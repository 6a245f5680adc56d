//go:build unix

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/trigger"
)

var scheduleConfig = clusterConfig + `
resource "mlcompute_schedule" "tick" {
  name         = "every-minute"
  workspace_id = mlcompute_workspace.ws.id
  trigger = {
    type       = "cron"
    expression = "* * * * *"
  }
  create_job = file("${path.module}/job.yaml")
  base_path  = path.module
}
`

// TestE2E_ScheduleFires: a one-minute cron schedule applied with terraform fires in the
// embedded engine: the job named for the tick exists and completes, with its code from
// the snapshot taken at apply, and the next plan is empty. The lateness (the job's
// submission minus the tick) is logged, not asserted.
func TestE2E_ScheduleFires(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	if err := os.MkdirAll(filepath.Join(u.workDir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"job.yaml":    "command: sh tick.sh\ncode: src\ncompute: cpu\n",
		"src/tick.sh": "echo tick from the snapshot\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(u.workDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	u.writeConfig(scheduleConfig)
	u.mustTerraform("apply", "-auto-approve")

	c := u.client()
	ctx := context.Background()
	s, err := c.GetSchedule(ctx, "e2e-team", "every-minute")
	if err != nil || s.NextRunTime == nil {
		t.Fatalf("schedule after apply: %+v, %v", s, err)
	}
	tick := *s.NextRunTime
	name := trigger.JobName("every-minute", tick)
	var job *api.Job
	u.waitFor("the tick's job completed", time.Until(tick)+90*time.Second, func() bool {
		j, err := c.GetJob(ctx, "e2e-team", name)
		if err == nil && api.Terminal(j.Status) {
			job = j
			return true
		}
		return false
	})
	if job.Status != api.JobCompleted || job.Schedule != "every-minute" {
		t.Fatalf("job %s: status %s schedule %q; want Completed, of every-minute", name, job.Status, job.Schedule)
	}
	t.Logf("tick %s: job %s submitted %s after its tick", tick.Format(time.RFC3339), name, job.SubmittedAt.Sub(tick))
	if out, _ := u.cli("job", "logs", "--workspace", "e2e-team", name); !slices.Contains(strings.Split(out, "\n"), "tick from the snapshot") {
		t.Fatalf("job logs:\n%s\nwant the script's line", out)
	}
	if out, code := u.terraform("plan", "-detailed-exitcode"); code != 0 {
		t.Fatalf("plan after the schedule fired: exit %d:\n%s", code, out)
	}
	u.mustTerraform("destroy", "-auto-approve")
}
