//go:build kubernetes

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/images"
	"github.com/containerd/containerd/namespaces"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/kubernetes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/imagearchive/imagearchivetest"
)

// TestE2E_KubeContainerJob: a job in a container environment on an attached Kubernetes
// cluster runs in a pod of the environment's image (the node image under a name of its own,
// loaded into the node's containerd as a user pushes an image to the registry the cluster
// pulls from). A job in an environment of an image archive runs too: the engine imports
// the archive into a node's containerd first, and no pod is left at the end.
func TestE2E_KubeContainerJob(t *testing.T) {
	t.Parallel()
	cs := requireKube(t)
	image := "mlctest.local/job:" + fmt.Sprint(time.Now().UnixNano())
	tagKubeImage(t, os.Getenv(kubernetes.ImageEnv), image)
	u := kubeUser(t)
	// A pod's tasks run under the engine's shell wrapper, which needs more of busybox than
	// the other drivers' container tasks do.
	archive := filepath.Join(t.TempDir(), "train.tar")
	imagearchivetest.Busybox(t, archive, "mlctest:2.5", imagearchivetest.Layer{
		"etc/os-release": "ID=mlctest\nPRETTY_NAME=\"mlctest 2.5\"\n",
	}, "bin/sh", "bin/cat", "bin/sleep", "bin/setsid", "bin/mkdir", "bin/mv", "bin/rm", "bin/id", "bin/head",
		"bin/tail", "bin/kill", "bin/hostname", "bin/date", "bin/env", "bin/chmod", "bin/ls", "bin/wc", "bin/tr")
	u.writeConfig(requiredProviders + fmt.Sprintf(`
provider "mlcompute" {}

resource "mlcompute_workspace" "ws" {
  name = %q
}

resource "mlcompute_attached_compute" "k8s" {
  name         = "k8s"
  workspace_id = mlcompute_workspace.ws.id
  kubernetes   = { kubeconfig = file(%q) }
}

resource "mlcompute_environment" "img" {
  name         = "img"
  workspace_id = mlcompute_workspace.ws.id
  container    = { image = %q }
}

resource "mlcompute_environment" "tar" {
  name         = "tar"
  workspace_id = mlcompute_workspace.ws.id
  container    = { image_archive = %q }
}
`, envWorkspace, os.Getenv("KUBECONFIG"), image, archive))
	u.mustTerraform("apply", "-auto-approve")

	id := u.envJob("k8s", "img", "sh", "-c", `sleep 3; echo "rank $RANK in $(hostname)"`)
	var podImage string
	u.waitFor("the job's pod", 2*time.Minute, func() bool {
		for _, p := range u.enginePods(cs) {
			podImage = p.Spec.Containers[0].Image
			return true
		}
		return false
	})
	if podImage != image {
		t.Fatalf("the job's pod is of image %q; want the environment's, %q", podImage, image)
	}
	job, log := u.finished(id, 3*time.Minute)
	if job.Status != api.JobCompleted || !strings.Contains(log, "rank 0 in ") {
		t.Fatalf("job %s (%s):\n%s", job.Status, job.Error, log)
	}
	// The archive's image reaches a node through its containerd, and the job's pod runs it:
	// it prints the os-release the archive holds.
	id = u.envJob("k8s", "tar", "sh", "-c", `cat /etc/os-release`)
	job, log = u.finished(id, 3*time.Minute)
	if job.Status != api.JobCompleted || !strings.Contains(log, `PRETTY_NAME="mlctest 2.5"`) {
		t.Fatalf("a job of an image archive on an attached cluster: %s (%s):\n%s\nwant the archive's os-release", job.Status, job.Error, log)
	}
	u.mustTerraform("destroy", "-auto-approve")
	u.waitFor("no pod left", 60*time.Second, func() bool { return len(u.enginePods(cs)) == 0 })
}

// tagKubeImage gives the cluster node's image from a second name, in the node's containerd
// (KUBE_CONTAINERD_ADDRESS, which `make kube-up` exports), for as long as the test runs.
func tagKubeImage(t *testing.T, from, to string) {
	t.Helper()
	sock := os.Getenv("KUBE_CONTAINERD_ADDRESS")
	if sock == "" {
		t.Fatal("this test loads an image into the cluster's containerd: set KUBE_CONTAINERD_ADDRESS (eval \"$(make -s kube-up)\")")
	}
	c, err := containerd.New(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := namespaces.WithNamespace(context.Background(), "k8s.io")
	src, err := c.ImageService().Get(ctx, from)
	if err != nil {
		t.Fatalf("the node image %s: %v", from, err)
	}
	if _, err := c.ImageService().Create(ctx, images.Image{Name: to, Target: src.Target}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := containerd.New(sock)
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.ImageService().Delete(ctx, to)
	})
}
