//go:build unix

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh/sshtest"
)

// TestE2E_AttachedMachine: a user attaches a machine (a real sshd test host) with
// terraform, runs a job with code on it through the CLI, and the engine is SIGKILLed while
// a second job runs there: after the restart the job ends with its true exit code and
// full output. Destroy detaches the machine.
func TestE2E_AttachedMachine(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	h := sshtest.Start(t)
	u.writeConfig(requiredProviders + `
provider "mlcompute" {}

resource "mlcompute_workspace" "ws" {
  name = "e2e-team"
}
` + attachedMachineHCL(t, "box", h))
	u.mustTerraform("apply", "-auto-approve")
	if out, code := u.terraform("plan", "-detailed-exitcode"); code != 0 {
		t.Fatalf("plan after apply: exit %d:\n%s", code, out)
	}
	if c := u.compute("box"); c.VirtualMachine == nil || c.VirtualMachine.HostKeyFingerprint != h.Fingerprint || c.VirtualMachine.VCPUs < 1 {
		t.Fatalf("compute show: %+v", c)
	}
	if out, _ := u.cli("compute", "list", "--workspace", "e2e-team"); !strings.Contains(out, h.User+"@"+h.Address) {
		t.Fatalf("compute list does not show the machine:\n%s", out)
	}

	code := t.TempDir()
	if err := os.WriteFile(filepath.Join(code, "train.sh"), []byte("echo \"code ok on $SSH_CONNECTION\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, exit := u.cli("job", "submit", "--workspace", "e2e-team", "--compute", "box", "--code", code, "--stream", "--", "sh", "train.sh")
	if exit != 0 || !strings.Contains(out, "code ok on ") || !strings.Contains(out, " "+h.Address+" ") {
		t.Fatalf("job with code on the machine: exit %d:\n%s", exit, out)
	}

	gate := filepath.Join(h.Home, "go")
	out, exit = u.cli("job", "submit", "--workspace", "e2e-team", "--compute", "box", "--", "sh", "-c",
		fmt.Sprintf("echo start; while [ ! -e %s ]; do sleep 0.05; done; echo end; exit 5", gate))
	if exit != 0 {
		t.Fatalf("submit: %s", out)
	}
	id := strings.TrimSpace(out)
	job := func() api.Job {
		out, code := u.cli("job", "show", "--workspace", "e2e-team", id, "-o", "json")
		if code != 0 {
			t.Fatalf("job show: %s", out)
		}
		var j api.Job
		decodeJSON(t, out, &j)
		return j
	}
	u.waitFor("job running", 60*time.Second, func() bool { return job().Status == api.JobRunning })
	pid := u.enginePID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	u.waitGone(pid, 10*time.Second)
	if err := os.WriteFile(gate, nil, 0o644); err != nil { // the job ends while no engine runs
		t.Fatal(err)
	}
	u.waitFor("job finished after the restart", 60*time.Second, func() bool { return api.Terminal(job().Status) })
	if got := job(); got.ExitCode == nil || *got.ExitCode != 5 {
		t.Fatalf("job: status %s exit %v, want exit 5", got.Status, got.ExitCode)
	}
	if out, _ := u.cli("job", "logs", "--workspace", "e2e-team", id); out != "start\nend\n" {
		t.Fatalf("job log %q, want start and end", out)
	}
	u.mustTerraform("destroy", "-auto-approve")
}
