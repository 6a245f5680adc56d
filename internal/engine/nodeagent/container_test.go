//go:build linux

package nodeagent

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt/containerrttest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/imagearchive/imagearchivetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent/proc"
)

// A task with a container runs its command in the image: it reads a file only the image
// holds, sees its environment and works in its own directory, whose outputs appear on the
// host; a second task of the same image finds it imported; a killed task's container
// processes are gone with it, and so is its container record (the sweep of ended
// containers keeps a running one).
func TestTaskRunsInItsContainer(t *testing.T) {
	sock := containerrttest.Start(t)
	archive := filepath.Join(t.TempDir(), "image.tar")
	digest := imagearchivetest.Busybox(t, archive, "mlctest:2.5", imagearchivetest.Layer{"usr/lib/mlctest/VERSION": "2.5\n"}, "bin/sh")
	image := TaskContainer{Address: sock, EngineID: fmt.Sprintf("e-%016x", rand.Uint64()), Archive: archive, Hash: digest[7:]}
	// ctr is the image for task key of node n1.
	ctr := func(key string) *TaskContainer {
		c := image
		c.Key = driver.MachineTaskKey("n1", key)
		return &c
	}
	a := startAgent(t, filepath.Join(shortTempDir(t), "n1"))
	ctx := ctxT(t)
	code := filepath.Join(t.TempDir(), "code")
	if err := os.MkdirAll(code, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(code, "train.sh"), []byte("echo trained >out/model.txt\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	for i, key := range []string{"job-1/0", "job-2/0"} {
		_, err := a.c.StartTask(ctx, TaskRequest{
			Key: key, CodeDir: code, Outputs: []TaskOutput{{Path: "out"}}, Env: map[string]string{"RANK": "0"}, Container: ctr(key),
			Command: []string{"/bin/busybox", "sh", "-c", `cat /usr/lib/mlctest/VERSION; echo "rank=$RANK"; pwd; sh train.sh; exit 3`},
		})
		if err != nil {
			t.Fatal(err)
		}
		end, err := a.c.Wait(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := a.c.Output(ctx, key, 0)
		if end.ExitCode != 3 {
			t.Fatalf("task %d: exit %d, want 3; output:\n%s", i, end.ExitCode, out)
		}
		tdir, _ := TaskDir(a.dir, key)
		work := filepath.Join(tdir, WorkDir)
		for _, want := range []string{"2.5\n", "rank=0\n", work + "\n"} {
			if !strings.Contains(string(out), want) {
				t.Fatalf("task %d: output lacks %q:\n%s", i, want, out)
			}
		}
		if b, err := os.ReadFile(filepath.Join(work, "out", "model.txt")); err != nil || string(b) != "trained\n" {
			t.Fatalf("task %d: its output on the host: %q, %v", i, b, err)
		}
	}
	if _, err := os.Stat("/usr/lib/mlctest/VERSION"); err == nil {
		t.Fatal("the host has the image's file: the test proves nothing")
	}

	// An image that cannot be imported ends the task with 125 and the reason in its output.
	missing := *ctr("job-4/0")
	missing.Archive, missing.Hash = filepath.Join(t.TempDir(), "none.tar"), "0123"
	if _, err := a.c.StartTask(ctx, TaskRequest{Key: "job-4/0", Container: &missing, Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if end, err := a.c.Wait(ctx, "job-4/0"); err != nil || end.ExitCode != 125 {
		t.Fatalf("a missing archive: %+v, %v; want exit 125", end, err)
	}
	if out, _ := a.c.Output(ctx, "job-4/0", 0); !strings.Contains(string(out), "none.tar") {
		t.Fatalf("a missing archive's output does not name it:\n%s", out)
	}

	// A killed task: the container's processes carry the task's marker and are killed with
	// the task; the container record stays until the engine's sweep.
	key := "job-3/0"
	st, err := a.c.StartTask(ctx, TaskRequest{Key: key, Container: ctr(key), Command: []string{"/bin/busybox", "sh", "-c", "echo up; exec sleep 600"}})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := containerrt.Open(ctx, sock, image.EngineID)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	tdir, _ := TaskDir(a.dir, key)
	for out := []byte{}; !strings.Contains(string(out), "up"); out, _ = a.c.Output(ctx, key, 0) {
		if err := ctx.Err(); err != nil {
			t.Fatalf("the task never started in its container: %v\n%s", err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The container's process (outside the task's process group: the shim started it)
	// carries the marker, so the agent's clean-up of an ended task finds it.
	inContainer := 0
	marked, err := proc.FindByEnv(TaskMarkerEnv, tdir)
	for _, p := range marked {
		if cmd, err := proc.Cmdline(p.Pid); err == nil && len(cmd) > 1 && cmd[0] == "sleep" && p.Pgid != st.Pgid {
			inContainer++
		}
	}
	if err != nil || inContainer != 1 {
		t.Fatalf("the container's sleep among the task's marked processes %v: %d, %v", marked, inContainer, err)
	}
	if removed, err := rt.SweepEnded(context.Background()); err != nil || len(removed) != 0 {
		t.Fatalf("sweep of ended containers while the task runs: removed %v, %v", removed, err)
	}
	if _, err := a.c.Kill(ctx, key); err != nil {
		t.Fatal(err)
	}
	if end, err := a.c.Wait(ctx, key); err != nil || end.Running {
		t.Fatalf("killed task: %+v, %v", end, err)
	}
	if left, err := proc.FindByEnv(TaskMarkerEnv, tdir); err != nil || len(left) != 0 {
		t.Fatalf("processes of the killed task's container: %v, %v", left, err)
	}
	if left, err := rt.Containers(context.Background()); err != nil || len(left) != 0 {
		t.Fatalf("containers after the kill: %v, %v; want the killed task's removed with it", left, err)
	}
}

// container-import puts an archive's image into the namespace it is given (a Kubernetes
// node's: k8s.io), unpacked, under its hash's name; a second import finds it there; a file
// that is not an image fails, saying so.
func TestContainerImportIntoANamespace(t *testing.T) {
	sock := containerrttest.Start(t)
	archive := filepath.Join(t.TempDir(), "image.tar")
	digest := imagearchivetest.Busybox(t, archive, "mlctest:2.5", imagearchivetest.Layer{"usr/lib/mlctest/VERSION": "2.5\n"}, "bin/sh")
	hash := digest[7:]
	args := []string{"--address", sock, "--namespace", containerrt.KubernetesNamespace, "--archive", archive, "--hash", hash}
	for i, want := range []string{"imported " + containerrt.ImageName(hash), containerrt.ImageName(hash) + " is there already"} {
		var out, errOut strings.Builder
		if code := ContainerImportMain(args, &out, &errOut); code != 0 || !strings.Contains(out.String(), want) {
			t.Fatalf("import %d: exit %d, %q %q; want %q", i, code, out.String(), errOut.String(), want)
		}
	}
	ctx := ctxT(t)
	rt, err := containerrt.OpenIn(ctx, sock, containerrt.KubernetesNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if hashes, err := rt.ImportedHashes(ctx); err != nil || len(hashes) != 1 || hashes[0] != hash {
		t.Fatalf("images in k8s.io: %v, %v; want the one imported", hashes, err)
	}
	other, err := containerrt.Open(ctx, sock, "")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if hashes, err := other.ImportedHashes(ctx); err != nil || len(hashes) != 0 {
		t.Fatalf("images in the engine's own namespace: %v, %v; want none", hashes, err)
	}

	notImage := filepath.Join(t.TempDir(), "notes.tar")
	if err := os.WriteFile(notImage, []byte("not a tar"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	bad := []string{"--address", sock, "--namespace", containerrt.KubernetesNamespace, "--archive", notImage, "--hash", "0123"}
	if code := ContainerImportMain(bad, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), notImage) {
		t.Fatalf("a file that is not an image: exit %d, %q; want 1 naming it", code, errOut.String())
	}
	if code := ContainerImportMain([]string{"--address", sock}, &out, &errOut); code != 2 {
		t.Fatalf("no --archive: exit %d; want 2", code)
	}
}
