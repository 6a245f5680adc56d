//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt/containerrttest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest/scorer"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/imagearchive/imagearchivetest"
)

// startContainerd starts a containerd of the test's own and returns its socket; it fails the
// test if a container outlives it.
func startContainerd(t *testing.T) string { return containerrttest.Start(t) }

// crashDuringContainerJobs is crashDuringJobs with the jobs in a container environment:
// after the crashes and the destroy no container is left (startContainerd checks).
func crashDuringContainerJobs(r *crashRound) {
	writeImage(r.t, filepath.Join(r.workDir, "images", "train.tar"), "2.5")
	crashJobsIn(r, "image")
}

// writeImage writes an image archive at file: a Docker archive of an image that has the
// host's static busybox as sh, cat, seq and sleep, and an /etc/os-release that only the
// image has.
func writeImage(t *testing.T, file, version string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	imagearchivetest.Busybox(t, file, "mlctest:"+version, imagearchivetest.Layer{
		"etc/os-release": fmt.Sprintf("ID=mlctest\nPRETTY_NAME=\"mlctest %s\"\n", version),
	}, "bin/sh", "bin/cat", "bin/seq", "bin/sleep")
}

// containerJob submits examples/container-job's job.yml, copied to dir, with the extra
// flags, and returns the job once it completed, and its log.
func (u *user) containerJob(dir string, flags ...string) (api.Job, string) {
	u.t.Helper()
	args := append([]string{"job", "submit", "-f", filepath.Join(dir, "job.yml"), "--workspace", "containers"}, flags...)
	out, code := u.cli(args...)
	if code != 0 {
		u.t.Fatalf("job submit -f job.yml %s: exit %d:\n%s", strings.Join(flags, " "), code, out)
	}
	id := strings.TrimSpace(out)
	var j api.Job
	u.waitFor("job "+id+" finished", 2*time.Minute, func() bool {
		j = u.showJob("containers", id)
		return api.Terminal(j.Status)
	})
	log, _ := u.cli("job", "logs", "--workspace", "containers", id)
	if j.Status != api.JobCompleted {
		u.t.Fatalf("job %s: %s, %s; log:\n%s", id, j.Status, j.Error, log)
	}
	return j, log
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
	sock := startContainerd(t) // before newUser: its clean-up stops the engine first
	u := newUser(t)
	u.env = append(u.env, "MLCOMPUTE_CONTAINERD_ADDRESS="+sock)
	dir := filepath.Join(u.copyExamples(), "container-job")
	archive := filepath.Join(dir, "images", "train.tar")
	writeImage(t, archive, "2.5")
	u.mustTerraformIn(dir, "apply", "-auto-approve")
	if out, code := u.terraformIn(dir, "plan", "-detailed-exitcode"); code != 0 {
		t.Fatalf("plan after apply: exit %d, want an empty plan:\n%s", code, out)
	}
	submit := func() (api.Job, string) { return u.containerJob(dir) }
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
	// The machine keeps the image of the environment as it is now, and not the old one;
	// after the destroy, none.
	hash := strings.Trim(strings.TrimSpace(u.mustTerraformIn(dir, "output", "environment_content_hash")), `"`)
	images := func() []string {
		rt, err := containerrt.Open(context.Background(), sock, "test")
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		hashes, err := rt.ImportedHashes(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return hashes
	}
	u.waitFor("only the current image on the machine", 30*time.Second, func() bool { return slices.Equal(images(), []string{hash}) })
	u.mustTerraformIn(dir, "destroy", "-auto-approve")
	u.waitFor("no image on the machine after the destroy", 30*time.Second, func() bool { return len(images()) == 0 })
}

// TestE2E_ContainerDeploymentRollout: an online endpoint deployment runs in a container
// environment (the static test scorer inside an image archive), and a new image applied with
// terraform rolls the deployment out under load with every request answered, the new
// instances replying from the new image.
func TestE2E_ContainerDeploymentRollout(t *testing.T) {
	requireAcc(t)
	t.Parallel()
	sock := startContainerd(t)
	u := newUser(t)
	u.env = append(u.env, "MLCOMPUTE_CONTAINERD_ADDRESS="+sock)
	scorerBin, err := os.ReadFile(filepath.Join(binDir, "scorer"))
	if err != nil {
		t.Fatal(err)
	}
	writeImage := func(version string) {
		imagearchivetest.Docker(t, filepath.Join(u.workDir, "scorer.tar"), "mlctest-scorer:"+version, imagearchivetest.Layer{
			"bin/scorer": string(scorerBin), strings.TrimPrefix(scorer.ImageVersionFile, "/"): version + "\n", "tmp/.keep": "",
		})
	}
	writeImage("1")
	u.writeConfig(requiredProviders + `
provider "mlcompute" {}

resource "mlcompute_workspace" "ws" {
  name = "e2e-image-serving"
}

resource "mlcompute_environment" "scorer" {
  name         = "scorer"
  workspace_id = mlcompute_workspace.ws.id
  container    = { image_archive = "scorer.tar" }
}
`)
	u.mustTerraform("apply", "-auto-approve")
	ctx := context.Background()
	// The probes leave room for an instance's start, which imports its image: their time,
	// initial_delay + period × failure_threshold, counts the import (30 s here).
	probe := &api.Probe{Path: "/health", InitialDelay: "PT0S", Period: "PT1S", Timeout: "PT1S", SuccessThreshold: 1, FailureThreshold: 30}
	ep, err := u.client().CreateEndpoint(ctx, "e2e-image-serving", api.EndpointSpec{
		Name: "images",
		Deployments: map[string]api.DeploymentSpec{"blue": {
			InstanceType: "Standard_DS2_v2", InstanceCount: 2, Command: []string{"/bin/scorer"},
			EnvironmentID:        api.EnvironmentID("e2e-image-serving", "scorer"),
			EnvironmentVariables: map[string]string{"SCORER_NAME": "blue"},
			LivenessProbe:        probe, ReadinessProbe: probe,
		}},
		Traffic: map[string]int64{"blue": 100},
	})
	if err != nil {
		t.Fatal(err)
	}
	u.waitEndpoint("e2e-image-serving", "images", api.ProvisioningSucceeded)
	// No instance failed on the way: restarts would hide a container that could not start
	// (two instances' tasks of one key once shared a container's name).
	noRestarts := func(when string) {
		got, err := u.client().GetEndpoint(ctx, "e2e-image-serving", "images")
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range got.Deployments["blue"].Instances {
			if in.Restarts != 0 {
				t.Fatalf("instance %s restarted %d times by the end of %s", in.ID, in.Restarts, when)
			}
		}
	}
	noRestarts("the first provisioning")
	keys, err := u.client().GetEndpointKeys(ctx, "e2e-image-serving", "images")
	if err != nil {
		t.Fatal(err)
	}
	images := func(results []scored) map[string]int {
		seen := map[string]int{}
		for _, r := range results {
			if r.status != 200 {
				t.Fatalf("a request got %d: %s", r.status, r.body)
			}
			seen[r.image]++
		}
		return seen
	}
	if seen := images(load(t, 100, 4, ep.ScoringURI, keys.PrimaryKey, nil)); seen["1"] != 100 {
		t.Fatalf("replies by image version %v; want all 100 from image 1", seen)
	}

	writeImage("2")
	var applied atomic.Bool
	go func() {
		defer applied.Store(true)
		if out, code := u.terraform("apply", "-auto-approve"); code != 0 {
			t.Errorf("apply of the new image: exit %d:\n%s", code, out)
		}
	}()
	var during []scored
	rolled := func() bool {
		got, err := u.client().GetEndpoint(ctx, "e2e-image-serving", "images")
		return err == nil && got.Deployments["blue"].Generation == 2 && len(got.Deployments["blue"].Instances) == 2 && got.ProvisioningState == api.ProvisioningSucceeded
	}
	for deadline := time.Now().Add(2 * time.Minute); !applied.Load() || !rolled(); {
		if time.Now().After(deadline) || t.Failed() {
			t.Fatalf("the rollout to image 2 did not finish; %d requests sent", len(during))
		}
		during = append(during, load(t, 50, 4, ep.ScoringURI, keys.PrimaryKey, nil)...)
	}
	t.Logf("rollout from image 1 to 2 under load: %d requests, by image %v", len(during), images(during))
	noRestarts("the rollout")
	if seen := images(load(t, 100, 4, ep.ScoringURI, keys.PrimaryKey, nil)); seen["2"] != 100 {
		t.Fatalf("after the rollout, replies by image version %v; want all 100 from image 2", seen)
	}
	if err := u.client().DeleteEndpoint(ctx, "e2e-image-serving", "images"); err != nil {
		t.Fatal(err)
	}
	u.mustTerraform("destroy", "-auto-approve")
}
