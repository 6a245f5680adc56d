//go:build kubernetes

package kubernetes

import (
	"archive/tar"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// A task with an image runs in a container of its own in the node's pod (it sees the
// variable only that container has), writes its output and outputs where every task does,
// and a kill from the node's container reaches it; an engine restart adopts it. A task of
// an image that cannot be pulled ends with 127 and the kubelet's reason in its output; the
// node goes on running tasks.
func TestClusterTaskInAnImage(t *testing.T) {
	t.Parallel()
	cfg, d := newRestartableDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	readyNode(t, d, driver.NodeSpec{Key: "n1", Owner: "ws/cpu", VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14})
	image := &driver.TaskContainer{Image: cfg.Image, Hash: "h1"}
	exited := func(d *Driver, key string) driver.Event {
		t.Helper()
		return waitEvent(t, d, "TaskExited of "+key, func(ev driver.Event) bool { return ev.Kind == driver.TaskExited && ev.TaskKey == key })
	}

	spec := driver.TaskSpec{
		Key: "job-0", Container: image, Env: map[string]string{"RANK": "0"},
		Command: []string{"sh", "-c", `echo "rank $RANK in task container $` + taskKeyVar + `"; echo model > out/model.txt`},
		Outputs: []driver.TaskOutput{{Path: "out"}},
	}
	if err := d.StartTask(ctx, "n1", spec); err != nil {
		t.Fatal(err)
	}
	if ev := exited(d, "job-0"); ev.ExitCode != 0 {
		out, _ := d.TaskOutput(ctx, "n1", "job-0", 0)
		t.Fatalf("the task in an image exited %d:\n%s", ev.ExitCode, out)
	}
	if out, err := d.TaskOutput(ctx, "n1", "job-0", 0); err != nil || string(out) != "rank 0 in task container job-0\n" {
		t.Fatalf("output %q, %v; want the rank and the task container's variable", out, err)
	}
	rc, err := d.FetchOutput(ctx, "n1", "job-0", "out")
	if err != nil {
		t.Fatal(err)
	}
	files := readTar(t, rc)
	if files["model.txt"] != "model\n" {
		t.Fatalf("outputs fetched from a task in an image: %v; want model.txt", files)
	}
	pod, err := clientset(t).CoreV1().Pods(cfg.Namespace).Get(ctx, d.podName("n1"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.EphemeralContainers) != 1 || pod.Spec.EphemeralContainers[0].Image != cfg.Image || pod.Spec.EphemeralContainers[0].TargetContainerName != containerName {
		t.Fatalf("the pod's ephemeral containers: %+v; want one of the task's image in the node container's namespace", pod.Spec.EphemeralContainers)
	}

	// A long task, adopted by a restarted driver and killed through the node's container.
	if err := d.StartTask(ctx, "n1", driver.TaskSpec{Key: "job-1", Container: image, Command: []string{"sh", "-c", "echo started; exec sleep 1000000"}}); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, d, "n1", "job-1", "started\n")
	_ = d.Close()
	d2 := newClusterDriver(t, cfg)
	if st, err := d2.TaskStatus(ctx, "n1", "job-1"); err != nil || !st.Running {
		t.Fatalf("TaskStatus after a restart: %+v, %v; want running", st, err)
	}
	if err := d2.KillTask(ctx, "n1", "job-1"); err != nil {
		t.Fatal(err)
	}
	if ev := exited(d2, "job-1"); ev.ExitCode <= 128 {
		t.Fatalf("the killed task in an image exited %d; want 128 + a signal", ev.ExitCode)
	}

	// An image no registry serves: the task ends with the kubelet's reason.
	bad := &driver.TaskContainer{Image: "mlcompute.invalid/no-such-image:1", Hash: "h2"}
	if err := d2.StartTask(ctx, "n1", driver.TaskSpec{Key: "job-2", Container: bad, Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if ev := exited(d2, "job-2"); ev.ExitCode != 127 {
		t.Fatalf("a task of an image that cannot be pulled exited %d; want 127", ev.ExitCode)
	}
	out, err := d2.TaskOutput(ctx, "n1", "job-2", 0)
	if err != nil || !strings.Contains(string(out), "mlcompute.invalid/no-such-image:1") || !strings.Contains(string(out), "could not start: ") {
		t.Fatalf("output of a task whose image cannot be pulled: %q, %v; want the image and the kubelet's reason", out, err)
	}
	// The node still runs tasks.
	if err := d2.StartTask(ctx, "n1", driver.TaskSpec{Key: "job-3", Container: image, Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if ev := exited(d2, "job-3"); ev.ExitCode != 0 {
		t.Fatalf("a task after a failed image exited %d", ev.ExitCode)
	}
	if err := d2.Terminate(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if pods := enginePods(t, d2); len(pods) != 0 {
		t.Fatalf("%d pods left after Terminate", len(pods))
	}
}

// waitOutput waits until a task's output is want.
func waitOutput(t *testing.T, d *Driver, node, task, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for {
		out, err := d.TaskOutput(ctx, node, task, 0)
		if err == nil && string(out) == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("output of %s: %q, %v; want %q", task, out, err, want)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// readTar reads a tar stream's regular files by name.
func readTar(t *testing.T, rc io.ReadCloser) map[string]string {
	t.Helper()
	defer rc.Close()
	files := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("reading the outputs' tar: %v", err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimPrefix(h.Name, "./")] = string(b)
		}
	}
}
