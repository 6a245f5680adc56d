//go:build linux

package local

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/cio"
	"github.com/containerd/containerd/oci"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt/containerrttest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/imagearchive/imagearchivetest"
)

// A task with a container runs in the image on a node of a driver that has a containerd:
// it reads a file only the image holds, and its output is fetched like any task's. A
// driver without one refuses the task permanently, naming the flag.
func TestTaskRunsInItsImageWithContainerd(t *testing.T) {
	sock := containerrttest.Start(t)
	archive := filepath.Join(t.TempDir(), "image.tar")
	digest := imagearchivetest.Busybox(t, archive, "mlctest:3.1", imagearchivetest.Layer{"etc/os-release": "ID=mlctest\nVERSION_ID=3.1\n"})
	spec := driver.TaskSpec{
		Key: "job-1/0", Env: map[string]string{"RANK": "0"}, Outputs: []driver.TaskOutput{{Path: "outputs"}},
		Command:   []string{"/bin/busybox", "sh", "-c", `/bin/busybox cp /etc/os-release outputs/; echo "rank $RANK"`},
		Container: &driver.TaskContainer{Archive: archive, Hash: digest[7:]},
	}

	plain := newDriver(t, "")
	create(t, plain, "n0", "ws/c")
	if err := plain.StartTask(ctxT(t), "n0", spec); !driver.IsPermanent(err) || !strings.Contains(err.Error(), "--containerd-address") {
		t.Fatalf("a container task without containerd: %v; want a permanent error naming --containerd-address", err)
	}

	root, err := os.MkdirTemp("", "mlc-")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "nodes")
	// Its own engine ID: runc keeps container state per machine, not per containerd.
	engineID := "e-" + filepath.Base(root)
	t.Cleanup(func() {
		cleanupNodes(t, dir)
		os.RemoveAll(root)
	})
	exe, _ := os.Executable()
	d, err := New(Config{Dir: dir, AgentArgv: []string{exe, "node-agent"}, ContainerdAddress: sock, EngineID: engineID,
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: logWriter{t}})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	create(t, d, "n1", "ws/c")
	ctx := ctxT(t)
	if err := d.StartTask(ctx, "n1", spec); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, d)
	out, _ := d.TaskOutput(ctx, "n1", "job-1/0", 0)
	if ev.TaskKey != "job-1/0" || ev.ExitCode != 0 || string(out) != "rank 0\n" {
		t.Fatalf("event %+v, output %q", ev, out)
	}
	rc, err := d.FetchOutput(ctx, "n1", "job-1/0", "outputs")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	found := ""
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(h.Name, "os-release") {
			b, _ := io.ReadAll(tr)
			found = string(b)
		}
	}
	if found != "ID=mlctest\nVERSION_ID=3.1\n" {
		t.Fatalf("the output's os-release is %q; want the image's", found)
	}

	// A killed task's container goes with it: its node's agent removes it before the exit
	// is recorded.
	long := spec
	long.Key, long.Outputs, long.Command = "job-2/0", nil, []string{"/bin/busybox", "sleep", "600"}
	if err := d.StartTask(ctx, "n1", long); err != nil {
		t.Fatal(err)
	}
	client, err := containerd.New(sock, containerd.WithDefaultNamespace(containerrt.Namespace))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// status is the state of the container of task key of node.
	status := func(node, key string) containerd.ProcessStatus {
		c, err := client.LoadContainer(ctx, containerrt.ContainerID(engineID, driver.MachineTaskKey(node, key)))
		if err != nil {
			return ""
		}
		task, err := c.Task(ctx, nil)
		if err != nil {
			return ""
		}
		st, err := task.Status(ctx)
		if err != nil {
			return ""
		}
		return st.Status
	}
	for status("n1", long.Key) != containerd.Running {
		if ctx.Err() != nil {
			t.Fatal("the long task's container never ran")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := d.KillTask(ctx, "n1", long.Key); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, d); ev.TaskKey != long.Key || ev.ExitCode != 137 {
		t.Fatalf("killed task: event %+v", ev)
	}
	if ids, err := client.Containers(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("containers after the kill: %v, %v; want none", ids, err)
	}

	// What an agent that died left (a container whose process ended, never removed) is
	// removed when a driver with the containerd starts.
	left, err := client.NewContainer(ctx, "mlc-left", containerd.WithImageName(containerrt.ImageName(digest[7:])),
		containerd.WithNewSnapshot("mlc-left", mustImage(t, client, containerrt.ImageName(digest[7:]))),
		containerd.WithContainerLabels(map[string]string{containerrt.LabelEngine: engineID, containerrt.LabelTask: "job-left/0"}),
		containerd.WithNewSpec(oci.WithImageConfig(mustImage(t, client, containerrt.ImageName(digest[7:]))), oci.WithProcessArgs("/bin/busybox", "true")))
	if err != nil {
		t.Fatal(err)
	}
	leftTask, err := left.NewTask(ctx, cio.NullIO)
	if err != nil {
		t.Fatal(err)
	}
	exited, err := leftTask.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := leftTask.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-exited
	d2, err := New(Config{Dir: dir, AgentArgv: []string{exe, "node-agent"}, ContainerdAddress: sock, EngineID: engineID})
	if err != nil {
		t.Fatal(err)
	}
	d2.Close()
	if ids, err := client.Containers(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("containers after a driver started: %v, %v", ids, err)
	}

	// Tasks of one key on two nodes (every endpoint instance's first task is serve-0) run
	// in two containers at once; a node terminated while its task runs takes its own
	// container with it, and only that one.
	long.Key = "job-3/0"
	create(t, d, "n2", "ws/c")
	for _, node := range []string{"n1", "n2"} {
		if err := d.StartTask(ctx, node, long); err != nil {
			t.Fatal(err)
		}
	}
	for status("n1", long.Key) != containerd.Running || status("n2", long.Key) != containerd.Running {
		if ctx.Err() != nil {
			t.Fatalf("the task's containers on n1 and n2: %q and %q; want both running", status("n1", long.Key), status("n2", long.Key))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := d.Terminate(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if got := status("n2", long.Key); got != containerd.Running {
		t.Fatalf("n2's container after n1 was terminated: %q; want it running", got)
	}
	if err := d.Terminate(ctx, "n2"); err != nil {
		t.Fatal(err)
	}
	if ids, err := client.Containers(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("containers after their nodes were terminated: %v, %v", ids, err)
	}
}

func mustImage(t *testing.T, client *containerd.Client, name string) containerd.Image {
	t.Helper()
	img, err := client.GetImage(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return img
}
