package enginetest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/environment"
)

// TestOldEnvironmentBuildsAreRemoved updates an environment while a job still runs in its
// old build: the old build stays until that job ends (and the job, importing its package
// at the very end, proves it was intact), then the engine removes it; the new build stays.
func TestOldEnvironmentBuildsAreRemoved(t *testing.T) {
	t.Parallel()
	e, c := localEngine(t)
	ctx := context.Background()
	wheels := wheelDir(t, "0.1", "0.2")
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "collect"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCompute(ctx, "collect", api.ComputeSpec{Name: "cpu", VMSize: "Standard_DS3_v2",
		ScaleSettings: &api.ScaleSettings{MinNodeCount: 0, MaxNodeCount: 2, ScaleDownNodesAfterIdleDuration: "PT0S"}}); err != nil {
		t.Fatal(err)
	}
	v1, err := c.CreateEnvironment(ctx, "collect", api.EnvironmentSpec{Name: "train", Python: &api.PythonEnvironment{
		Requirements: []string{"mlctest==0.1"}, FindLinks: []string{wheels}}})
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(e.DataDir, "envs")
	old, oldBuilds := filepath.Join(cache, environment.CacheName(v1.ContentHash)), filepath.Join(cache, "builds", environment.CacheName(v1.ContentHash)+"-*")
	stop := filepath.Join(t.TempDir(), "stop")
	// The long job waits for the test, then imports the package from its (old) build.
	long, err := c.SubmitJob(ctx, "collect", api.JobSpec{Compute: "cpu", Environment: "train", Command: []string{"sh", "-c",
		`while [ ! -e "$1" ]; do sleep 0.1; done; python -c "import mlctest; print(mlctest.HELLO)"`, "long", stop}})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		j, err := c.GetJob(ctx, "collect", long.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status == api.JobRunning {
			break
		}
		if api.Terminal(j.Status) || time.Now().After(deadline) {
			t.Fatalf("the long job is %s (%s), never running", j.Status, j.Error)
		}
	}

	v2, err := c.UpdateEnvironment(ctx, "collect", "train", api.EnvironmentUpdate{Python: &api.PythonEnvironment{
		Requirements: []string{"mlctest==0.2"}, FindLinks: []string{wheels}}})
	if err != nil {
		t.Fatal(err)
	}
	short, err := c.SubmitJob(ctx, "collect", api.JobSpec{Compute: "cpu", Environment: "train", Command: []string{"python", "-c", "import mlctest; print(mlctest.HELLO)"}})
	if err != nil {
		t.Fatal(err)
	}
	if j := waitJob(t, c, "collect", short.ID, 3*time.Minute); j.Status != api.JobCompleted || !strings.Contains(jobLog(t, c, "collect", j.ID), "mlctest 0.2") {
		t.Fatalf("the job on the new environment: %s (%s):\n%s", j.Status, j.Error, jobLog(t, c, "collect", j.ID))
	}
	// The old build is still used by the long job: it stays.
	if _, err := os.Stat(filepath.Join(old, "bin", "python")); err != nil {
		t.Fatalf("the old build was removed while a job runs in it: %v", err)
	}

	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if j := waitJob(t, c, "collect", long.ID, time.Minute); j.Status != api.JobCompleted || !strings.Contains(jobLog(t, c, "collect", j.ID), "mlctest 0.1") {
		t.Fatalf("the long job: %s (%s):\n%s", j.Status, j.Error, jobLog(t, c, "collect", j.ID))
	}
	// Its last user ended: the old build goes, the new one stays.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, linkErr := os.Lstat(old)
		dirs, _ := filepath.Glob(oldBuilds)
		if os.IsNotExist(linkErr) && len(dirs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old build is still there 30s after its last job ended (link: %v, dirs: %v)", linkErr, dirs)
		}
	}
	if _, err := os.Stat(filepath.Join(cache, environment.CacheName(v2.ContentHash), "bin", "python")); err != nil {
		t.Fatalf("the current build was removed: %v", err)
	}
}
