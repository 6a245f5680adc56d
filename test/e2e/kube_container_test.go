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
	archive := wrapperArchive(t, "2.5")
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

// wrapperArchive writes an image archive of busybox with what the engine's task wrapper
// runs in a pod (more of busybox than the other drivers' container tasks need) and an
// os-release of the given version, and returns its path.
func wrapperArchive(t *testing.T, version string) string {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "train.tar")
	imagearchivetest.Busybox(t, archive, "mlctest:"+version, imagearchivetest.Layer{
		"etc/os-release": "ID=mlctest\nPRETTY_NAME=\"mlctest " + version + "\"\n",
	}, "bin/sh", "bin/cat", "bin/sleep", "bin/setsid", "bin/mkdir", "bin/mv", "bin/rm", "bin/id", "bin/head",
		"bin/tail", "bin/kill", "bin/hostname", "bin/date", "bin/env", "bin/chmod", "bin/ls", "bin/wc", "bin/tr")
	return archive
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

// TestE2E_KubeNodesContainerJob: with the engine's nodes as pods (`serve --nodes
// kubernetes`), a job in a container environment runs in a container of the image in its
// node's pod: an image the cluster has, the same image with a Python environment built on
// top (in the pod's /mlcompute/envs), and an image archive (imported into the containerd
// of the pod's Kubernetes node). A job whose image cannot be pulled fails, naming the
// image, and the node goes on running jobs; destroy leaves no pod.
func TestE2E_KubeNodesContainerJob(t *testing.T) {
	t.Parallel()
	cs := requireKube(t)
	image := "mlctest.local/nodes-job:" + fmt.Sprint(time.Now().UnixNano())
	tagKubeImage(t, os.Getenv(kubernetes.ImageEnv), image)
	archive := wrapperArchive(t, "2.6")
	u := kubeUser(t)
	u.startServe("--nodes", "kubernetes")
	u.writeConfig(requiredProviders + fmt.Sprintf(`
provider "mlcompute" {}

resource "mlcompute_workspace" "ws" {
  name = %q
}

resource "mlcompute_compute_cluster" "cpu" {
  name         = "cpu"
  workspace_id = mlcompute_workspace.ws.id
  vm_size      = "Standard_DS3_v2"
  scale_settings = {
    max_node_count                       = 1
    scale_down_nodes_after_idle_duration = "PT60S"
  }
}

resource "mlcompute_environment" "img" {
  name         = "img"
  workspace_id = mlcompute_workspace.ws.id
  container    = { image = %q }
}

resource "mlcompute_environment" "imgpy" {
  name         = "imgpy"
  workspace_id = mlcompute_workspace.ws.id
  container    = { image = %q, python = { requirements = [] } }
}

resource "mlcompute_environment" "tar" {
  name         = "tar"
  workspace_id = mlcompute_workspace.ws.id
  container    = { image_archive = %q }
}

resource "mlcompute_environment" "missing" {
  name         = "missing"
  workspace_id = mlcompute_workspace.ws.id
  container    = { image = "mlcompute.invalid/no-such-image:1" }
}
`, envWorkspace, image, image, archive))
	u.mustTerraform("apply", "-auto-approve")

	id := u.envJob("cpu", "img", "sh", "-c", `echo "rank $RANK in the container of $MLCOMPUTE_TASK_KEY"`)
	job, log := u.finished(id, 3*time.Minute)
	if job.Status != api.JobCompleted || !strings.Contains(log, "rank 0 in the container of ") {
		t.Fatalf("a job of an image on the engine's pods: %s (%s):\n%s", job.Status, job.Error, log)
	}
	pods := u.enginePods(cs)
	if len(pods) != 1 {
		t.Fatalf("%d pods; want the cluster's one node", len(pods))
	}
	for _, p := range pods {
		if len(p.Spec.EphemeralContainers) == 0 || p.Spec.EphemeralContainers[0].Image != image {
			t.Fatalf("the node's pod has containers %+v; want one of the environment's image %s", p.Spec.EphemeralContainers, image)
		}
	}

	id = u.envJob("cpu", "imgpy", "python", "-c", `import sys; print("python in", sys.prefix)`)
	job, log = u.finished(id, 3*time.Minute)
	if job.Status != api.JobCompleted || !strings.Contains(log, "python in /mlcompute/envs/") {
		t.Fatalf("a job of an image with a Python environment on top: %s (%s):\n%s", job.Status, job.Error, log)
	}

	id = u.envJob("cpu", "tar", "sh", "-c", `cat /etc/os-release`)
	job, log = u.finished(id, 3*time.Minute)
	if job.Status != api.JobCompleted || !strings.Contains(log, `PRETTY_NAME="mlctest 2.6"`) {
		t.Fatalf("a job of an image archive on the engine's pods: %s (%s):\n%s\nwant the archive's os-release", job.Status, job.Error, log)
	}

	id = u.envJob("cpu", "missing", "true")
	job, log = u.finished(id, 3*time.Minute)
	if job.Status != api.JobFailed || !strings.Contains(log, "mlcompute.invalid/no-such-image:1") || !strings.Contains(log, "could not start") {
		t.Fatalf("a job whose image cannot be pulled: %s (%s):\n%s\nwant it failed, naming the image", job.Status, job.Error, log)
	}
	id = u.envJob("cpu", "img", "true")
	if job, log = u.finished(id, 3*time.Minute); job.Status != api.JobCompleted {
		t.Fatalf("a job after one whose image could not be pulled: %s (%s):\n%s", job.Status, job.Error, log)
	}
	// Measured, not asserted: a job in an image on an idle node, from submit to its end.
	t.Logf("a job in an image on an idle pod: started %s after its submission, ended %s after it",
		startDelay(job), job.EndedAt.Sub(job.SubmittedAt).Round(time.Millisecond))
	u.mustTerraform("destroy", "-auto-approve")
	u.waitFor("no pod left", 60*time.Second, func() bool { return len(u.enginePods(cs)) == 0 })
}
