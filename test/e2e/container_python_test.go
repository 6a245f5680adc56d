//go:build linux

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/imagearchive/imagearchivetest"
)

// TestE2E_ContainerPythonOnTop: an environment of an image with python3 (this machine's,
// put in an archive) and a Python environment on top of it, built offline from a local
// wheel. The first job builds it in a container of the image, once, and imports the
// package with the build's interpreter; the second finds the build. The same python block
// on an image without python3 fails the job, naming what the image lacks.
func TestE2E_ContainerPythonOnTop(t *testing.T) {
	requireAcc(t)
	needVenv(t)
	t.Parallel()
	sock := startContainerd(t) // before newUser: its clean-up stops the engine first
	u := newUser(t)
	u.env = append(u.env, "MLCOMPUTE_CONTAINERD_ADDRESS="+sock)
	images := t.TempDir()
	imagearchivetest.Docker(t, filepath.Join(images, "python.tar"), "mlctest-python:1", imagearchivetest.HostPython(t))
	writeImage(t, filepath.Join(images, "busybox.tar"), "2.5")
	u.writeConfig(trainConfig(wheelDir(t)) + fmt.Sprintf(`
resource "mlcompute_environment" "on_top" {
  name         = "on-top"
  workspace_id = mlcompute_workspace.ws.id
  container = {
    image_archive = %[1]q
    python        = { requirements = ["mlctest==0.1"], find_links = [%[3]q] }
  }
}

resource "mlcompute_environment" "no_python" {
  name         = "no-python"
  workspace_id = mlcompute_workspace.ws.id
  container = {
    image_archive = %[2]q
    python        = { requirements = ["mlctest==0.1"], find_links = [%[3]q] }
  }
}
`, filepath.Join(images, "python.tar"), filepath.Join(images, "busybox.tar"), wheelDir(t)))
	u.mustTerraform("apply", "-auto-approve")

	for i := range 2 {
		j, log := u.finished(u.envJob("cpu", "on-top", "python", "-c", importMLCTest), 3*time.Minute)
		if j.Status != api.JobCompleted || !strings.Contains(log, "hello from mlctest in ") {
			t.Fatalf("job %d in on-top: %s (%s):\n%s", i, j.Status, j.Error, log)
		}
		built := strings.Count(log, "mlcompute: building environment")
		if (i == 0) != (built == 1) || built > 1 {
			t.Fatalf("job %d built the environment %d times; want once, by the first job:\n%s", i, built, log)
		}
		t.Logf("job %d: submitted %s, started after %s", i, j.SubmittedAt.Format("15:04:05.000"), startDelay(j))
	}
	j, log := u.finished(u.envJob("cpu", "no-python", "python", "-c", importMLCTest), 3*time.Minute)
	if j.Status != api.JobFailed || !strings.Contains(log, `the image has no "python3" on its PATH`) {
		t.Fatalf("job in an image without python3: %s (%s); want it failed naming python3:\n%s", j.Status, j.Error, log)
	}
	u.mustTerraform("destroy", "-auto-approve")
}
