//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt/containerrttest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/imagearchive/imagearchivetest"
)

// writeImage writes an image archive at file: a Docker archive of an image that has the
// host's static busybox as sh and cat, and an /etc/os-release that only the image has.
func writeImage(t *testing.T, file, version string) {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal("this test needs the host's static busybox: run `make test-deps` (Debian package busybox-static)")
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	imagearchivetest.Docker(t, file, "mlctest:"+version, imagearchivetest.Layer{
		"bin/sh": string(bb), "bin/cat": string(bb),
		"etc/os-release": fmt.Sprintf("ID=mlctest\nPRETTY_NAME=\"mlctest %s\"\n", version), "tmp/.keep": "",
	})
}

// TestE2E_ContainerJobExample follows examples/container-job/README.md as a user whose
// machine runs containerd would: terraform declares an environment from an image archive,
// and the CLI's job runs in it on local nodes of the embedded engine. The job prints the
// image's /etc/os-release (the machine has another) with its RANK and leaves its report as
// an output; the second job finds the image imported. A new archive at the same path plans
// an update in place, and the next job runs in the new image. No container outlives the
// test (containerrttest fails it otherwise).
func TestE2E_ContainerJobExample(t *testing.T) {
	requireAcc(t)
	t.Parallel()
	sock := containerrttest.Start(t) // before newUser: its clean-up stops the engine first
	u := newUser(t)
	u.env = append(u.env, "MLCOMPUTE_CONTAINERD_ADDRESS="+sock)
	dir := filepath.Join(u.copyExamples(), "container-job")
	archive := filepath.Join(dir, "images", "train.tar")
	writeImage(t, archive, "2.5")
	u.mustTerraformIn(dir, "apply", "-auto-approve")
	if out, code := u.terraformIn(dir, "plan", "-detailed-exitcode"); code != 0 {
		t.Fatalf("plan after apply: exit %d, want an empty plan:\n%s", code, out)
	}
	submit := func() (api.Job, string) {
		t.Helper()
		out, code := u.cli("job", "submit", "-f", filepath.Join(dir, "job.yml"), "--workspace", "containers")
		if code != 0 {
			t.Fatalf("job submit -f job.yml: exit %d:\n%s", code, out)
		}
		id := strings.TrimSpace(out)
		var j api.Job
		u.waitFor("job "+id+" finished", 2*time.Minute, func() bool {
			j = u.showJob("containers", id)
			return api.Terminal(j.Status)
		})
		log, _ := u.cli("job", "logs", "--workspace", "containers", id)
		if j.Status != api.JobCompleted {
			t.Fatalf("job %s: %s, %s; log:\n%s", id, j.Status, j.Error, log)
		}
		return j, log
	}
	for i, what := range []string{"first: imports the image", "second: finds it"} {
		j, log := submit()
		for _, want := range []string{"image: mlctest 2.5\n", "rank: 0 of 1\n"} {
			if !strings.Contains(log, want) {
				t.Fatalf("job %s's log lacks %q:\n%s", j.ID, want, log)
			}
		}
		t.Logf("job %d (%s) ran from %s to %s", i, what, j.StartedAt.Format(time.StampMilli), j.EndedAt.Format(time.StampMilli))
		if i == 0 {
			out := filepath.Join(u.workDir, "out")
			if got, code := u.cli("job", "download", "--workspace", "containers", j.ID, "--output-name", "report", "--download-path", out); code != 0 {
				t.Fatalf("job download: exit %d: %s", code, got)
			}
			if b, err := os.ReadFile(filepath.Join(out, "named-outputs", "report", "report.txt")); err != nil || string(b) != "image: mlctest 2.5\n" {
				t.Fatalf("the job's report: %q, %v", b, err)
			}
		}
	}

	writeImage(t, archive, "2.6")
	if out, code := u.terraformIn(dir, "plan", "-detailed-exitcode"); code != 2 || !strings.Contains(out, "update in-place") {
		t.Fatalf("plan after a new archive: exit %d, want an update in place:\n%s", code, out)
	}
	u.mustTerraformIn(dir, "apply", "-auto-approve")
	if _, log := submit(); !strings.Contains(log, "image: mlctest 2.6\n") {
		t.Fatalf("the job after the new image's apply:\n%s", log)
	}
	u.mustTerraformIn(dir, "destroy", "-auto-approve")
}
