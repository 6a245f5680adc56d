//go:build unix

package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func workspacesConfig(n int) string {
	var b strings.Builder
	b.WriteString(requiredProviders)
	b.WriteString("provider \"mlcompute\" {}\n")
	fmt.Fprintf(&b, "resource \"mlcompute_workspace\" \"ws\" {\n  count = %d\n  name = \"team-${count.index}\"\n  description = \"workspace ${count.index}\"\n  tags = { owner = \"e2e\" }\n}\n", n)
	return b.String()
}

// TestE2E_ApplyStartsEmbeddedEngine: a user with no engine running applies; the provider
// starts the engine from its own binary, the CLI sees the same engine, a re-plan is empty,
// and deleting the data dir stops the engine.
func TestE2E_ApplyStartsEmbeddedEngine(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	if out, code := u.cli("status"); code != 1 || !strings.Contains(out, "no engine answers") {
		t.Fatalf("status before apply: exit %d, %q; want exit 1 (status never starts an engine)", code, out)
	}
	u.writeConfig(workspacesConfig(3))
	u.mustTerraform("apply", "-auto-approve")

	out, code := u.cli("status", "-o", "json")
	if code != 0 {
		t.Fatalf("status after apply: exit %d: %s", code, out)
	}
	var st api.Status
	decodeJSON(t, out, &st)
	if st.PID <= 0 || st.NodesDriver != "local" || st.DataDir != u.home {
		t.Fatalf("status = %+v; want a local engine on %s", st, u.home)
	}
	if got := len(u.workspaces()); got != 3 {
		t.Fatalf("engine holds %d workspaces; want 3", got)
	}
	if out, code := u.terraform("plan", "-detailed-exitcode"); code != 0 {
		t.Fatalf("plan after apply: exit %d (want 0, no changes):\n%s", code, out)
	}

	// Sizes through the CLI come from the same engine.
	out, code = u.cli("sizes", "list", "--gpu", "-o", "json")
	if code != 0 {
		t.Fatalf("sizes list: exit %d: %s", code, out)
	}
	var sizes api.SizeList
	decodeJSON(t, out, &sizes)
	if len(sizes.Sizes) == 0 {
		t.Fatal("sizes list --gpu returned nothing")
	}
	for _, s := range sizes.Sizes {
		if s.GPUs < 1 {
			t.Errorf("sizes list --gpu returned %s with %d GPUs", s.Name, s.GPUs)
		}
	}

	u.mustTerraform("destroy", "-auto-approve")
	if got := len(u.workspaces()); got != 0 {
		t.Fatalf("engine holds %d workspaces after destroy", got)
	}
}

// TestE2E_EngineKilledDuringApplyConverges kills the engine with SIGKILL in the middle of an
// apply. Running the apply again must converge: every workspace exists exactly once in the
// engine and in the state, and a re-plan is empty.
func TestE2E_EngineKilledDuringApplyConverges(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	const n = 60
	u.writeConfig(workspacesConfig(n))

	// Start the engine first so its pid is known before the apply.
	if out, code := u.cli("sizes", "list", "-o", "json"); code != 0 {
		t.Fatalf("starting engine: %s", out)
	}
	pid := u.enginePID()
	if pid == 0 {
		t.Fatal("no engine after the CLI call")
	}

	cmd := exec.Command(terraform, "apply", "-auto-approve", "-no-color", "-parallelism=4")
	cmd.Dir, cmd.Env = u.workDir, u.env
	var applyOut strings.Builder
	cmd.Stdout, cmd.Stderr = &applyOut, &applyOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill once some but not all workspaces exist.
	killed := false
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		list, err := u.client().ListWorkspaces(t.Context())
		if err == nil && len(list) >= 5 {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatalf("killing engine: %v", err)
			}
			killed = true
			t.Logf("engine %d killed with %d of %d workspaces created", pid, len(list), n)
			break
		}
	}
	_ = cmd.Wait()
	if !killed {
		t.Fatalf("apply finished before the engine could be killed:\n%s", applyOut.String())
	}
	t.Logf("first apply (engine killed midway), exit %d", cmd.ProcessState.ExitCode())

	out := u.mustTerraform("apply", "-auto-approve", "-parallelism=4")
	if strings.Contains(out, "already exists") {
		t.Fatalf("second apply hit a duplicate:\n%s", out)
	}
	if newPID := u.enginePID(); newPID == pid || newPID == 0 {
		t.Fatalf("engine pid after restart = %d (killed %d)", newPID, pid)
	}
	ws := u.workspaces()
	seen := map[string]bool{}
	for _, w := range ws {
		if seen[w.Name] {
			t.Errorf("workspace %s twice", w.Name)
		}
		seen[w.Name] = true
	}
	if len(ws) != n {
		t.Fatalf("engine holds %d workspaces; want %d", len(ws), n)
	}
	state, _ := u.terraform("state", "list")
	if got := strings.Count(state, "mlcompute_workspace.ws["); got != n {
		t.Fatalf("state tracks %d workspaces; want %d:\n%s", got, n, state)
	}
	if out, code := u.terraform("plan", "-detailed-exitcode"); code != 0 {
		t.Fatalf("plan after convergence: exit %d:\n%s", code, out)
	}
}

// TestE2E_ServeIdleExitAndShutdown: `mlcompute serve` exits by itself once idle, and
// `mlcompute shutdown` stops a running engine and returns once it has stopped.
func TestE2E_ServeIdleExitAndShutdown(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	serve := exec.Command(binDir+"/mlcompute", "serve", "--idle-exit", "2s")
	serve.Env = u.env
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serve.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("idle engine exited with %v; want a clean exit", err)
		}
	case <-time.After(60 * time.Second):
		_ = serve.Process.Kill()
		t.Fatal("engine with --idle-exit 2s still running after 60s")
	}

	if out, code := u.cli("sizes", "list"); code != 0 {
		t.Fatalf("auto-start via CLI: %s", out)
	}
	pid := u.enginePID()
	if out, code := u.cli("shutdown"); code != 0 || !strings.Contains(out, "has stopped") {
		t.Fatalf("shutdown: exit %d %q", code, out)
	}
	if !u.waitGone(pid, 15*time.Second) {
		t.Fatalf("engine %d still running after shutdown", pid)
	}
	if out, code := u.cli("shutdown"); code != 0 || !strings.Contains(out, "no engine running") {
		t.Fatalf("second shutdown: exit %d %q", code, out)
	}
}
