//go:build unix

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent"
)

var clusterConfig = requiredProviders + `
provider "mlcompute" {}

resource "mlcompute_workspace" "ws" {
  name = "e2e-team"
}

resource "mlcompute_compute_cluster" "cpu" {
  name         = "cpu"
  workspace_id = mlcompute_workspace.ws.id
  vm_size      = "Standard_DS3_v2"
  scale_settings = {
    min_node_count                       = 0
    max_node_count                       = 2
    scale_down_nodes_after_idle_duration = "PT3S"
  }
}
`

func (u *user) compute(name string) api.Compute {
	u.t.Helper()
	out, code := u.cli("compute", "show", "--workspace", "e2e-team", name, "-o", "json")
	if code != 0 {
		u.t.Fatalf("compute show: exit %d: %s", code, out)
	}
	var c api.Compute
	decodeJSON(u.t, out, &c)
	return c
}

func (u *user) waitFor(what string, limit time.Duration, cond func() bool) {
	u.t.Helper()
	if !waitUntil(limit, cond) {
		u.t.Fatalf("never reached within %s: %s", limit, what)
	}
}

// waitUntil polls cond until it holds (true) or limit passes (false).
func waitUntil(limit time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

// jobIDOf is the job id in the first line of `job submit --stream`'s output ("job <id> ...").
func jobIDOf(t *testing.T, out string) string {
	t.Helper()
	f := strings.Fields(strings.TrimPrefix(out, "job "))
	if len(f) == 0 {
		t.Fatalf("no job id in the output of job submit:\n%s", out)
	}
	return f[0]
}

// nodesStayIdle checks, right after job id of workspace ws ended, that its compute holds
// want nodes (count) while its idle time has not passed since the job's end: fewer means
// nodes were released before their idle time. A machine so loaded that the count comes
// only after the idle time cannot tell, and the test log says so. It returns the job's end.
func (u *user) nodesStayIdle(ws, id string, idle time.Duration, want int, count func() int) time.Time {
	u.t.Helper()
	got, countedAt := count(), time.Now()
	job, err := u.client().GetJob(context.Background(), ws, id)
	if err != nil || job.EndedAt == nil {
		u.t.Fatalf("job %s: %v; want an ended job", id, err)
	}
	since := countedAt.Sub(*job.EndedAt).Round(time.Millisecond)
	switch idleEnd := job.EndedAt.Add(idle); {
	case countedAt.Before(idleEnd) && got != want:
		u.t.Fatalf("%s after job %s ended its compute holds %d nodes; want its %d nodes, idle, until %s after", since, id, got, want, idle)
	case !countedAt.Before(idleEnd):
		u.t.Logf("the nodes were first counted %s after job %s ended, past the idle time (%s): %d left", since, id, idle, got)
	}
	return *job.EndedAt
}

// TestE2E_ClusterScalesForRealJobs: a cluster declared with min 0 scales to a node when a
// job is submitted, runs it for real, and goes back to 0 after its idle time; the runtime
// changes never show as a Terraform diff.
func TestE2E_ClusterScalesForRealJobs(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	u.writeConfig(clusterConfig)
	u.mustTerraform("apply", "-auto-approve")
	if c := u.compute("cpu"); c.CurrentNodeCount != 0 {
		t.Fatalf("fresh cluster has %d nodes; min is 0", c.CurrentNodeCount)
	}

	code := t.TempDir()
	// sh, not python: a fresh machine is only sure to have a POSIX shell.
	script := "echo rank $RANK of $WORLD_SIZE master $MASTER_ADDR:$MASTER_PORT\nexit ${EXIT:-0}\n"
	if err := os.WriteFile(filepath.Join(code, "train.sh"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	out, exit := u.cli("job", "submit", "--workspace", "e2e-team", "--compute", "cpu", "--code", code, "--instance-count", "2", "--stream", "--", "sh", "train.sh")
	if exit != 0 || !strings.Contains(out, "rank 0 of 2 master 127.0.0.1:") {
		t.Fatalf("job submit --stream: exit %d:\n%s", exit, out)
	}
	u.nodesStayIdle("e2e-team", jobIDOf(t, out), 3*time.Second, 2, func() int { return int(u.compute("cpu").CurrentNodeCount) })
	// Runtime attributes are computed-only: scaling is not drift.
	if out, code := u.terraform("plan", "-detailed-exitcode"); code != 0 {
		t.Fatalf("plan while scaled up: exit %d:\n%s", code, out)
	}

	out, exit = u.cli("job", "submit", "--workspace", "e2e-team", "--compute", "cpu", "--code", code, "--env", "EXIT=3", "--stream", "--", "sh", "train.sh")
	if exit != 3 {
		t.Fatalf("failing job: exit %d (want the job's own 3):\n%s", exit, out)
	}

	out, exit = u.cli("job", "submit", "--workspace", "e2e-team", "--compute", "cpu", "--instance-count", "3", "--", "true")
	if exit == 0 || !strings.Contains(out, "max_node_count 2") {
		t.Fatalf("3 nodes on max 2 was not refused at submit: exit %d: %s", exit, out)
	}

	u.waitFor("cluster back to 0 nodes", 60*time.Second, func() bool { return u.compute("cpu").CurrentNodeCount == 0 })
	if out, code := u.terraform("plan", "-detailed-exitcode"); code != 0 {
		t.Fatalf("plan after scale-down: exit %d:\n%s", code, out)
	}
	u.mustTerraform("destroy", "-auto-approve")
}

// TestE2E_EngineKilledWhileJobsRun: SIGKILL the engine while two jobs run. After a restart
// each job ends with its true exit code and full output, and no process is left behind.
func TestE2E_EngineKilledWhileJobsRun(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	u.writeConfig(clusterConfig)
	u.mustTerraform("apply", "-auto-approve")

	marker := filepath.Join(t.TempDir(), "go")
	var ids []string
	for i, exitCode := range []int{0, 5} {
		// Each job prints, waits for the test's signal file, prints again and exits.
		cmd := fmt.Sprintf("echo start-%d; while [ ! -e %s ]; do sleep 0.05; done; echo end-%d; exit %d", i, marker, i, exitCode)
		out, code := u.cli("job", "submit", "--workspace", "e2e-team", "--compute", "cpu", "--", "sh", "-c", cmd)
		if code != 0 {
			t.Fatalf("submit: %s", out)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	jobShow := func(id string) api.Job {
		out, code := u.cli("job", "show", "--workspace", "e2e-team", id, "-o", "json")
		if code != 0 {
			t.Fatalf("job show: %s", out)
		}
		var j api.Job
		decodeJSON(t, out, &j)
		return j
	}
	u.waitFor("both jobs running", 60*time.Second, func() bool {
		return jobShow(ids[0]).Status == api.JobRunning && jobShow(ids[1]).Status == api.JobRunning
	})

	pid := u.enginePID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	u.waitGone(pid, 10*time.Second)
	if err := os.WriteFile(marker, nil, 0o644); err != nil { // the jobs finish while no engine runs
		t.Fatal(err)
	}

	for i, want := range []int{0, 5} {
		j := func() api.Job { return jobShow(ids[i]) } // the CLI restarts the engine
		u.waitFor("job "+ids[i]+" finished", 60*time.Second, func() bool { return api.Terminal(j().Status) })
		got := j()
		if got.ExitCode == nil || *got.ExitCode != want {
			t.Errorf("job %s: status %s exit %v; want exit %d", ids[i], got.Status, got.ExitCode, want)
		}
		out, _ := u.cli("job", "logs", "--workspace", "e2e-team", ids[i])
		if !strings.Contains(out, fmt.Sprintf("start-%d", i)) || !strings.Contains(out, fmt.Sprintf("end-%d", i)) {
			t.Errorf("job %s log is not complete:\n%s", ids[i], out)
		}
	}
	if newPID := u.enginePID(); newPID == pid || newPID == 0 {
		t.Fatalf("engine not restarted (pid %d, killed %d)", newPID, pid)
	}
	if c := u.compute("cpu"); c.CurrentNodeCount > 2 {
		t.Fatalf("%d nodes; max is 2", c.CurrentNodeCount)
	}
	// current_node_count leaves out nodes still leaving; a node record goes only once the
	// driver confirmed its release, so wait for the records before looking for processes.
	u.waitFor("every node released", 60*time.Second, func() bool { return len(u.compute("cpu").Nodes) == 0 })
	if left := u.processesOfHome(); len(left) > 0 {
		t.Fatalf("processes left behind after every node was released: %v", left)
	}
	u.mustTerraform("destroy", "-auto-approve")
}

// processesOfHome lists node agents and task processes that belong to this user's data dir
// (they carry it in their command line or their MLCOMPUTE_TASK_DIR), excluding the engine.
func (u *user) processesOfHome() []string {
	var left []string
	engine := u.enginePID()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid := 0
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == engine || !processAlive(pid) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		nodes := filepath.Join(u.home, "nodes")
		if cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); cwd == filepath.Join(nodes, nodeagent.StandbyDir) {
			// The engine's standby agent, not yet given a node: it lives and dies with the
			// engine. Once given one it works in that node's directory and counts here.
			continue
		}
		if strings.Contains(string(cmdline), nodes) || strings.Contains(string(environ), "MLCOMPUTE_TASK_DIR="+nodes) {
			left = append(left, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(string(cmdline), "\x00", " ")))
		}
	}
	return left
}
