//go:build unix

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/trigger"
)

// crashAroundTick: the engine of a one-minute schedule dies within a second either side of
// a tick (half the time again while it recovers). The tick fires exactly once: before the
// tick the engine that comes back fires it as the one catch-up run, in the middle of the
// submission it finds the tick it committed and submits that job again under the same name
// and key, after it nothing is left to do. The tick's job, which appends its ID to a file
// outside the engine, runs once and completes; the schedule's next tick is ahead; the plan
// is empty.
func crashAroundTick(r *crashRound) {
	dir := r.t.TempDir()
	runs := filepath.Join(dir, "runs")
	job := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(job, []byte("command: echo $MLCOMPUTE_JOB_ID >> "+runs+"\ncompute: warm\n"), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.writeConfig(crashConfig(false, "", 0) + fmt.Sprintf(`
resource "mlcompute_schedule" "minutely" {
  name         = "minutely"
  workspace_id = mlcompute_workspace.ws.id
  trigger      = { type = "cron", expression = "* * * * *" }
  create_job   = file(%q)
  base_path    = %q
  depends_on   = [mlcompute_compute_cluster.warm]
}
`, job, dir))
	r.mustTerraform("apply", "-auto-approve")
	s, err := r.client().GetSchedule(context.Background(), "crash", "minutely")
	if err != nil || s.NextRunTime == nil {
		r.t.Fatalf("schedule after apply: %+v, %v", s, err)
	}
	tick := *s.NextRunTime
	name := trigger.JobName("minutely", tick)
	offset := time.Duration(r.rng.Int64N(int64(2*time.Second))) - time.Second
	time.Sleep(time.Until(tick.Add(offset)))
	r.killedMidOperation = true
	r.t.Logf("killing the engine %s the tick %s", offset, tick.Format(time.RFC3339))
	<-r.crash()
	if r.rng.IntN(2) == 0 {
		r.wake()
		r.crashAgainWhileRecovering()
	}
	r.wake()

	var j api.Job
	r.waitFor("the tick's job "+name+" ended", 90*time.Second, func() bool {
		got, err := r.client().GetJob(context.Background(), "crash", name)
		if err != nil {
			return false
		}
		j = *got
		return api.Terminal(j.Status)
	})
	if j.Status != api.JobCompleted || j.Schedule != "minutely" {
		r.t.Fatalf("job %s: %s (%s), schedule %q; want Completed, of minutely", name, j.Status, j.Error, j.Schedule)
	}
	b, _ := os.ReadFile(runs)
	if n := strings.Count(string(b), name+"\n"); n != 1 {
		r.t.Errorf("the tick's job %s ran %d times; want once:\n%s", name, n, b)
	}
	s, err = r.client().GetSchedule(context.Background(), "crash", "minutely")
	if err != nil || s.NextRunTime == nil || !s.NextRunTime.After(tick) {
		r.t.Errorf("schedule after the crash: next run %v, %v; want a tick after %s", s.NextRunTime, err, tick)
	}
	if out, code := r.terraform("plan", "-detailed-exitcode"); code != 0 {
		r.t.Fatalf("a plan after the crash is not empty (exit %d):\n%s", code, out)
	}
	r.checkStateMatchesEngine()
}
