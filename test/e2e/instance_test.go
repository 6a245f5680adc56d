//go:build unix

package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

var instanceConfig = requiredProviders + `
provider "mlcompute" {}

resource "mlcompute_workspace" "ws" {
  name = "e2e-team"
}

resource "mlcompute_compute_instance" "dev" {
  name                      = "dev-box"
  workspace_id              = mlcompute_workspace.ws.id
  vm_size                   = "Standard_DS3_v2"
  idle_time_before_shutdown = "PT3S"
  setup_scripts = {
    startup_script = { inline = "echo started" }
  }
}
`

// startServe runs `mlcompute serve` for the user's data dir with extra flags, as an operator
// would, and returns once it answers.
func (u *user) startServe(flags ...string) {
	u.t.Helper()
	cmd := exec.Command(binDir+"/mlcompute", append([]string{"serve"}, flags...)...)
	cmd.Env = u.env
	if err := cmd.Start(); err != nil {
		u.t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }() // reaped when it exits (the data dir's deletion stops it)
	u.waitFor("engine serving", 30*time.Second, func() bool { return u.enginePID() == cmd.Process.Pid })
}

// TestE2E_InstanceIdleShutdown: with the engine's policy lowered to seconds, an instance
// stays up while a job runs on it and while a session is open, stops by itself once idle,
// and the stop is no drift.
func TestE2E_InstanceIdleShutdown(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	u.startServe("--min-idle-shutdown", "1s")
	// 10 s of idle time: each CLI call below must land before the instance has been idle
	// that long, and one can take seconds on a loaded machine (with 3 s, the job's submit
	// right after the apply sometimes found the instance already stopping).
	u.writeConfig(strings.Replace(instanceConfig, `idle_time_before_shutdown = "PT3S"`, `idle_time_before_shutdown = "PT10S"`, 1))
	u.mustTerraform("apply", "-auto-approve")
	if c := u.compute("dev-box"); c.State != api.InstanceRunning {
		t.Fatalf("instance %s after apply; want Running", c.State)
	}

	// A job that outlives the idle time keeps it awake.
	out, code := u.cli("job", "submit", "--workspace", "e2e-team", "--compute", "dev-box", "--stream", "--", "sh", "-c", "sleep 12; echo trained")
	if code != 0 || !strings.Contains(out, "trained") {
		t.Fatalf("job on the instance: exit %d: %s", code, out)
	}
	if c := u.compute("dev-box"); c.State != api.InstanceRunning {
		t.Fatalf("instance %s right after a 12s job with a 10s idle time; want Running", c.State)
	}

	// An open session keeps it awake too; its input and exit status pass through.
	session := exec.Command(binDir+"/mlcompute", "compute", "exec", "--workspace", "e2e-team", "dev-box", "--", "sh", "-c", "sleep 11; read x; echo got $x; exit 3")
	session.Env = u.env
	session.Stdin = strings.NewReader("hello\n")
	raw, err := session.CombinedOutput()
	if exitErr, ok := err.(*exec.ExitError); !ok || exitErr.ExitCode() != 3 || !strings.Contains(string(raw), "got hello") {
		t.Fatalf("exec session: %v: %s", err, raw)
	}
	if c := u.compute("dev-box"); c.State != api.InstanceRunning {
		t.Fatalf("instance %s right after an 11s session; want Running", c.State)
	}

	u.waitFor("idle shutdown", 60*time.Second, func() bool { return u.compute("dev-box").State == api.InstanceStopped })
	c := u.compute("dev-box")
	if c.LastOperation == nil || c.LastOperation.Trigger != api.TriggerIdleShutdown {
		t.Fatalf("last operation %+v; want trigger IdleShutdown", c.LastOperation)
	}
	if out, code := u.terraform("plan", "-detailed-exitcode"); code != 0 {
		t.Fatalf("plan after idle shutdown: exit %d:\n%s", code, out)
	}
	// An apply never starts an instance that idle shutdown stopped.
	u.mustTerraform("apply", "-auto-approve")
	if c := u.compute("dev-box"); c.State != api.InstanceStopped {
		t.Fatalf("apply restarted the instance: %s", c.State)
	}
	out, code = u.cli("compute", "start", "--workspace", "e2e-team", "dev-box")
	if code != 0 {
		t.Fatalf("compute start: %s", out)
	}
	u.waitFor("running after start", 30*time.Second, func() bool { return u.compute("dev-box").State == api.InstanceRunning })
	u.mustTerraform("destroy", "-auto-approve")
}

// TestE2E_InstanceStopsIdleTimeAfterALongJob: with idle_time_before_shutdown = PT16S, an
// instance that ran an 8 s job stops about 16 s after the job ends (never before), and a
// user's start of the running instance restarts its idle clock instead of stopping it.
func TestE2E_InstanceStopsIdleTimeAfterALongJob(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	u.startServe("--min-idle-shutdown", "1s")
	// 16 s of idle time, not the other tests' 3: each step below must land inside a window,
	// and a CLI call can take seconds on a loaded machine, so each window is 6 s or more.
	cfg := strings.Replace(instanceConfig, `  setup_scripts = {
    startup_script = { inline = "echo started" }
  }
`, "", 1)
	u.writeConfig(strings.Replace(cfg, `idle_time_before_shutdown = "PT3S"`, `idle_time_before_shutdown = "PT16S"`, 1))
	u.mustTerraform("apply", "-auto-approve")

	// start on the running instance: it stays Running and its idle clock starts again.
	time.Sleep(8 * time.Second) // 8 of the 16 idle seconds pass before the user's start
	if out, code := u.cli("compute", "start", "--workspace", "e2e-team", "dev-box"); code != 0 {
		t.Fatalf("compute start of a running instance: %s", out)
	}
	time.Sleep(10 * time.Second) // 2 s past the first deadline, 6 s before the second
	if c := u.compute("dev-box"); c.State != api.InstanceRunning {
		t.Fatalf("instance %s (%+v) after a start of the running instance; want Running", c.State, c.LastOperation)
	}

	jobID, code := u.cli("job", "submit", "--workspace", "e2e-team", "--compute", "dev-box", "--", "sh", "-c", "sleep 8; echo trained")
	if code != 0 {
		t.Fatalf("job submit: %s", jobID)
	}
	jobID = strings.TrimSpace(jobID)
	var job api.Job
	u.waitFor("job completed", 60*time.Second, func() bool {
		out, code := u.cli("job", "show", "--workspace", "e2e-team", jobID, "-o", "json")
		if code != 0 {
			return false
		}
		decodeJSON(t, out, &job)
		return job.Status == api.JobCompleted
	})
	if job.EndedAt == nil {
		t.Fatalf("completed job %s has no ended_at", jobID)
	}
	u.waitFor("idle shutdown after the job", 60*time.Second, func() bool { return u.compute("dev-box").State == api.InstanceStopped })
	c := u.compute("dev-box")
	if c.LastOperation == nil || c.LastOperation.Trigger != api.TriggerIdleShutdown {
		t.Fatalf("last operation %+v; want trigger IdleShutdown", c.LastOperation)
	}
	// The rule, not the timing: the stop is never before the job's end plus the idle time.
	stoppedAfter := c.LastOperation.Time.Sub(*job.EndedAt)
	if stoppedAfter < 16*time.Second {
		t.Fatalf("stopped %s after the job ended; idle_time_before_shutdown is 16s", stoppedAfter)
	}
	t.Logf("stopped %s after the 8 s job ended (idle time 16 s)", stoppedAfter)
	u.mustTerraform("destroy", "-auto-approve")
}
