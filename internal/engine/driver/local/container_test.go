package local

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt/containerrttest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/imagearchive/imagearchivetest"
)

// A task with a container runs in the image on a node of a driver that has a containerd:
// it reads a file only the image holds, and its output is fetched like any task's. A
// driver without one refuses the task permanently, naming the flag.
func TestTaskRunsInItsImageWithContainerd(t *testing.T) {
	sock := containerrttest.Start(t)
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal("this test needs the host's static busybox: run `make test-deps` (Debian package busybox-static)")
	}
	archive := filepath.Join(t.TempDir(), "image.tar")
	digest := imagearchivetest.Docker(t, archive, "mlctest:3.1", imagearchivetest.Layer{
		"bin/busybox": string(bb), "etc/os-release": "ID=mlctest\nVERSION_ID=3.1\n", "tmp/.keep": "",
	})
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
	t.Cleanup(func() {
		cleanupNodes(t, dir)
		os.RemoveAll(root)
	})
	exe, _ := os.Executable()
	d, err := New(Config{Dir: dir, AgentArgv: []string{exe, "node-agent"}, ContainerdAddress: sock, EngineID: "e1",
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
}
