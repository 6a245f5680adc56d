package enginetest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/environment"
)

// needVenv fails, naming the package, when this machine's python3 cannot make a virtual
// environment with pip (Debian without python3-venv); `make test` installs it.
func needVenv(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("python3", "-m", "venv", filepath.Join(dir, "v")).CombinedOutput(); err != nil {
		t.Fatalf("python3 -m venv does not work here (make test installs python3-venv: scripts/test-deps.sh): %v\n%s", err, out)
	}
}

func waitJob(t *testing.T, c *client.Client, ws, id string, limit time.Duration) *api.Job {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(50 * time.Millisecond) {
		j, err := c.GetJob(context.Background(), ws, id)
		if err != nil {
			t.Fatal(err)
		}
		if api.Terminal(j.Status) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s (%s) after %s", id, j.Status, j.Reason, limit)
		}
	}
}

func jobLog(t *testing.T, c *client.Client, ws, id string) string {
	t.Helper()
	var all []byte
	var offset int64
	for range 100 {
		chunk, err := c.JobLogs(context.Background(), ws, id, 0, offset)
		if err != nil {
			t.Fatal(err)
		}
		all, offset = append(all, chunk.Data...), chunk.NextOffset
		if len(chunk.Data) == 0 {
			break
		}
	}
	return string(all)
}

// TestLocalEnvironmentBuildsOnceAndIsReused builds a real virtual environment on local
// nodes from a wheel made here (offline, find_links alone), runs jobs that import it, and
// checks the DESIGN 8 promises: the first job pays the build, a later job on another node
// of the machine starts without one, two jobs at once build a new environment once, a bad
// requirement fails its job with pip's words, a half-built leftover is never used, and a
// user-managed interpreter comes first on PATH.
func TestLocalEnvironmentBuildsOnceAndIsReused(t *testing.T) {
	t.Parallel()
	e, c := localEngine(t)
	ctx := context.Background()
	wheels := t.TempDir()
	if _, err := enginetest.MakeWheel(wheels, "mlctest", "0.1", "HELLO = 'hello from mlctest'\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "envs"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCompute(ctx, "envs", api.ComputeSpec{Name: "cpu", VMSize: "Standard_DS3_v2",
		ScaleSettings: &api.ScaleSettings{MinNodeCount: 0, MaxNodeCount: 2, ScaleDownNodesAfterIdleDuration: "PT0S"}}); err != nil {
		t.Fatal(err)
	}
	env, err := c.CreateEnvironment(ctx, "envs", api.EnvironmentSpec{Name: "train", Python: &api.PythonEnvironment{
		Requirements: []string{"mlctest==0.1"}, FindLinks: []string{wheels}}})
	if err != nil {
		t.Fatal(err)
	}
	// A build that was killed half-way left a directory behind: it must never be used.
	name := environment.CacheName(env.ContentHash)
	leftover := filepath.Join(e.DataDir, "envs", "builds", name+"-1")
	if err := os.MkdirAll(filepath.Join(leftover, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	importIt := []string{"python", "-c", "import mlctest, sys; print(mlctest.HELLO, 'in', sys.prefix)"}
	submit := func(envName string, cmd []string) *api.Job {
		t.Helper()
		j, err := c.SubmitJob(ctx, "envs", api.JobSpec{Compute: "cpu", Command: cmd, Environment: envName})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	startDelay := func(j *api.Job) time.Duration {
		if j.StartedAt == nil {
			t.Fatalf("job %s never started: %s", j.ID, j.Error)
		}
		return j.StartedAt.Sub(j.SubmittedAt)
	}

	// First job: builds.
	j1 := waitJob(t, c, "envs", submit("train", importIt).ID, 3*time.Minute)
	log1 := jobLog(t, c, "envs", j1.ID)
	if j1.Status != api.JobCompleted || !strings.Contains(log1, "building environment "+name) || !strings.Contains(log1, "hello from mlctest in "+filepath.Join(e.DataDir, "envs", name)) {
		t.Fatalf("job 1 %s (%s):\n%s", j1.Status, j1.Error, log1)
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Fatalf("the half-built leftover %s is still there (%v)", leftover, err)
	}
	// Second job, on a fresh node (the first was released at once): no build.
	j2 := waitJob(t, c, "envs", submit("train", importIt).ID, time.Minute)
	log2 := jobLog(t, c, "envs", j2.ID)
	if j2.Status != api.JobCompleted || strings.Contains(log2, "building environment") || !strings.Contains(log2, "no build needed") || !strings.Contains(log2, "hello from mlctest") {
		t.Fatalf("job 2 %s (%s):\n%s", j2.Status, j2.Error, log2)
	}
	if j1.Nodes[0] == j2.Nodes[0] {
		t.Logf("note: job 2 reused job 1's node %s", j1.Nodes[0])
	}
	t.Logf("start delay: job 1 (built the environment) %s, job 2 (reused it) %s", startDelay(j1).Round(time.Millisecond), startDelay(j2).Round(time.Millisecond))

	// Two jobs at once with a new environment: one build.
	if _, err := c.CreateEnvironment(ctx, "envs", api.EnvironmentSpec{Name: "twice", Python: &api.PythonEnvironment{
		Requirements: []string{"mlctest"}, FindLinks: []string{wheels}}}); err != nil {
		t.Fatal(err)
	}
	a, b := submit("twice", importIt), submit("twice", importIt)
	a, b = waitJob(t, c, "envs", a.ID, 3*time.Minute), waitJob(t, c, "envs", b.ID, 3*time.Minute)
	logs := jobLog(t, c, "envs", a.ID) + jobLog(t, c, "envs", b.ID)
	if a.Status != api.JobCompleted || b.Status != api.JobCompleted || strings.Count(logs, "mlcompute: building environment") != 1 {
		t.Fatalf("two jobs at once: %s, %s; want both completed after one build:\n%s", a.Status, b.Status, logs)
	}
	if a.Nodes[0] == b.Nodes[0] {
		t.Fatalf("both jobs ran on node %s; the test wants two nodes building at once", a.Nodes[0])
	}

	// A bad requirement fails the job with pip's message.
	if _, err := c.CreateEnvironment(ctx, "envs", api.EnvironmentSpec{Name: "bad", Python: &api.PythonEnvironment{
		Requirements: []string{"nope==9"}, FindLinks: []string{wheels}}}); err != nil {
		t.Fatal(err)
	}
	bad := waitJob(t, c, "envs", submit("bad", importIt).ID, 3*time.Minute)
	if bad.Status != api.JobFailed || !strings.Contains(bad.Error, `building environment "bad" failed`) || !strings.Contains(bad.Error, "nope==9") {
		t.Fatalf("bad requirement: %s: %q", bad.Status, bad.Error)
	}

	// A user-managed environment: its interpreter's directory first on PATH.
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal(err)
	}
	if real, err := filepath.EvalSymlinks(py); err == nil {
		py = real
	}
	if _, err := c.CreateEnvironment(ctx, "envs", api.EnvironmentSpec{Name: "mine", UserManaged: &api.UserManagedEnvironment{InterpreterPath: py}}); err != nil {
		t.Fatal(err)
	}
	mine := waitJob(t, c, "envs", submit("mine", []string{"sh", "-c", "command -v " + filepath.Base(py)}).ID, time.Minute)
	if out := jobLog(t, c, "envs", mine.ID); mine.Status != api.JobCompleted || !strings.Contains(out, py+"\n") {
		t.Fatalf("user-managed: %s (%s):\n%s", mine.Status, mine.Error, out)
	}
	if _, err := c.CreateEnvironment(ctx, "envs", api.EnvironmentSpec{Name: "gone", UserManaged: &api.UserManagedEnvironment{InterpreterPath: "/nonexistent/bin/python"}}); err != nil {
		t.Fatal(err)
	}
	gone := waitJob(t, c, "envs", submit("gone", importIt).ID, time.Minute)
	if gone.Status != api.JobFailed || !strings.Contains(gone.Error, "/nonexistent/bin/python is not an executable file") {
		t.Fatalf("missing interpreter: %s: %q", gone.Status, gone.Error)
	}
}

// localEngine starts an engine whose nodes are real local processes (this test binary is
// their node agent) and returns it with a client. Environments need python3's venv.
func localEngine(t *testing.T) (*enginetest.Engine, *client.Client) {
	t.Helper()
	needVenv(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := enginetest.Start(t, enginetest.Options{AgentArgv: []string{exe, "node-agent"}})
	return e, e.Client(t, "")
}

// wheelDir makes a find_links directory holding the mlctest package in each version; its
// HELLO says which.
func wheelDir(t *testing.T, versions ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, v := range versions {
		if _, err := enginetest.MakeWheel(dir, "mlctest", v, "HELLO = 'mlctest "+v+"'\n"); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
