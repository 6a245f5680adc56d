//go:build linux

package containerrt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/namespaces"
	"golang.org/x/sys/unix"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt/containerrttest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/imagearchive/imagearchivetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/syncbuf"
)

// busyboxImage writes a Docker archive of an image holding the host's static busybox and a
// package version file, and returns its path and config digest.
func busyboxImage(t *testing.T, version string) (string, string) {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "image.tar")
	digest := imagearchivetest.Busybox(t, archive, "mlctest:"+version, imagearchivetest.Layer{"usr/lib/mlctest/VERSION": version + "\n"})
	return archive, digest
}

// Tasks that start together on a machine import the same new image at once (each through
// its own connection, as each task's container-run has): every one succeeds, and the image
// is there once, unpacked.
func TestConcurrentImportsOfOneImage(t *testing.T) {
	sock := containerrttest.Start(t)
	ctx := context.Background()
	archive, digest := busyboxImage(t, "1.1")
	const tasks = 6
	errs := make(chan error, tasks)
	for range tasks {
		go func() {
			rt, err := containerrt.Open(ctx, sock, "engine-a")
			if err != nil {
				errs <- err
				return
			}
			defer rt.Close()
			_, err = rt.Import(ctx, archive, digest[7:])
			errs <- err
		}()
	}
	for range tasks {
		if err := <-errs; err != nil {
			t.Fatalf("an import beside others: %v", err)
		}
	}
	rt, err := containerrt.Open(ctx, sock, "engine-a")
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if hashes, err := rt.ImportedHashes(ctx); err != nil || len(hashes) != 1 || hashes[0] != digest[7:] {
		t.Fatalf("imported: %v, %v; want the one image", hashes, err)
	}
	if imported, err := rt.Import(ctx, archive, digest[7:]); err != nil || imported {
		t.Fatalf("an import after them: imported %v, %v; want the image found, unpacked", imported, err)
	}
}

// An environment's image by reference, on a machine that does not have it: pulled from its
// registry (one on loopback, over plain HTTP as containerd does for loopback), unpacked once,
// and the task runs in it. The image is pushed from another containerd, so the pull cannot
// find any of it locally.
func TestTaskPullsItsImageFromARegistry(t *testing.T) {
	registry := containerrttest.StartRegistry(t)
	ctx := context.Background()
	archive, digest := busyboxImage(t, "2.4")
	ref := registry + "/team/train:2.4"
	pushFrom := containerrttest.Start(t)
	src, err := containerrt.Open(ctx, pushFrom, "engine-a")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Import(ctx, archive, digest[7:]); err != nil {
		t.Fatal(err)
	}
	client, err := containerd.New(pushFrom)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	nctx := namespaces.WithNamespace(ctx, containerrt.Namespace)
	img, err := client.GetImage(nctx, containerrt.ImageName(digest[7:]))
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Push(nctx, ref, img.Target()); err != nil {
		t.Fatalf("pushing the test image to the loopback registry: %v", err)
	}

	sock := containerrttest.Start(t)
	work := t.TempDir()
	task := containerrt.Task{Address: sock, EngineID: "engine-a", Key: "job-pull-rank0", Image: ref, Hash: "h-pull",
		Cwd: work, Binds: []string{work}, Args: []string{"/bin/busybox", "cat", "/usr/lib/mlctest/VERSION"}}
	var out syncbuf.Buffer
	if code, err := containerrt.RunTask(ctx, task, &out, &out); err != nil || code != 0 || out.String() != "2.4\n" {
		t.Fatalf("a task of an image in a registry: exit %d, %v; output %q; want the image's 2.4", code, err, out.String())
	}
	rt, err := containerrt.Open(ctx, sock, "engine-a")
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if pulled, err := rt.Pull(ctx, ref); err != nil || pulled {
		t.Fatalf("the second task's pull: pulled %v, %v; want the image found, unpacked", pulled, err)
	}
	// An image the machine's operator imported under its reference (as for a registry that
	// needs credentials), and did not unpack: found and unpacked, its registry never asked.
	operator := containerrttest.Start(t)
	opClient, err := containerd.New(operator)
	if err != nil {
		t.Fatal(err)
	}
	defer opClient.Close()
	private := "registry.invalid/team/private:1"
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	_, err = opClient.Import(nctx, f, containerd.WithIndexName(private))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if imported, err := opClient.GetImage(nctx, private); err != nil {
		t.Fatal(err)
	} else if unpacked, _ := imported.IsUnpacked(nctx, "overlayfs"); unpacked {
		t.Fatal("the operator's import is unpacked already; the test wants one that is not")
	}
	moved := task
	moved.Address, moved.Image, moved.Key = operator, private, "job-private-rank0"
	var movedOut syncbuf.Buffer
	if code, err := containerrt.RunTask(ctx, moved, &movedOut, &movedOut); err != nil || code != 0 || movedOut.String() != "2.4\n" {
		t.Fatalf("a task of an image imported under its reference: exit %d, %v; output %q", code, err, movedOut.String())
	}
	// A tag the registry does not have is an error naming the image, and the run starts nothing.
	task.Image, task.Key = registry+"/team/train:9.9", "job-missing-rank0"
	if _, err := containerrt.RunTask(ctx, task, &out, &out); err == nil || !strings.Contains(err.Error(), `image "`+task.Image+`" cannot be resolved`) {
		t.Fatalf("a task of a tag the registry lacks: %v; want an error naming the image", err)
	}
	waitContainers(t, rt, 0)
}

func TestOpenNamesAMissingRuntime(t *testing.T) {
	_, err := containerrt.Open(context.Background(), filepath.Join(t.TempDir(), "none.sock"), "e1")
	if !errors.Is(err, containerrt.ErrNoRuntime) || !strings.Contains(err.Error(), "none.sock") {
		t.Fatalf("no containerd: %v; want ErrNoRuntime naming the socket", err)
	}
}

// An image is imported once per content hash; a task runs in it with the host's network,
// its working directory bind-mounted at the same path, its environment and its exit status;
// a cancelled task and a swept container leave nothing behind.
func TestImportOnceRunAndSweep(t *testing.T) {
	sock := containerrttest.Start(t)
	ctx := context.Background()
	rt, err := containerrt.Open(ctx, sock, "engine-a")
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	archive, digest := busyboxImage(t, "1.0")

	t0 := time.Now()
	imported, err := rt.Import(ctx, archive, digest[7:])
	if err != nil || !imported {
		t.Fatalf("first import: %v, %v", imported, err)
	}
	first := time.Since(t0)
	t0 = time.Now()
	if imported, err := rt.Import(ctx, archive, digest[7:]); err != nil || imported {
		t.Fatalf("second import of one hash: imported %v, %v; want it found", imported, err)
	}
	t.Logf("import: first %s (import and unpack), second %s (found)", first.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	// An image reference: the imported image is found; an unknown one, with no registry to
	// pull it from, is an error naming it.
	if pulled, err := rt.Pull(ctx, containerrt.ImageName(digest[7:])); err != nil || pulled {
		t.Fatalf("pull of an imported image: pulled %v, %v; want it found", pulled, err)
	}
	if _, err := rt.Pull(ctx, "registry.invalid/team/train:1"); err == nil || !strings.Contains(err.Error(), `image "registry.invalid/team/train:1" cannot be resolved`) {
		t.Fatalf("pull of an unresolvable image: %v", err)
	}

	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "from the host") }))
	defer host.Close()
	work := t.TempDir()
	var out syncbuf.Buffer
	t0 = time.Now()
	code, err := rt.Run(ctx, containerrt.RunSpec{
		ID: "job1-rank1", Image: containerrt.ImageName(digest[7:]), Cwd: work, Binds: []string{work},
		Args: []string{"/bin/busybox", "sh", "-c", `cat /usr/lib/mlctest/VERSION; echo "rank=$RANK"; pwd; ` +
			`/bin/busybox wget -q -O - ` + host.URL + `; echo; echo written >out.txt; exit 3`},
		Env: []string{"RANK=1"}, Stdout: &out, Stderr: &out,
	})
	t.Logf("a task in the imported image: %s from create to exit", time.Since(t0).Round(time.Millisecond))
	if err != nil || code != 3 {
		t.Fatalf("run: exit %d, %v; output:\n%s", code, err, out.String())
	}
	for _, want := range []string{"1.0\n", "rank=1\n", work + "\n", "from the host"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	if b, err := os.ReadFile(filepath.Join(work, "out.txt")); err != nil || string(b) != "written\n" {
		t.Fatalf("the task's file in its bind-mounted directory: %q, %v", b, err)
	}

	// A cancelled task is stopped and its container removed.
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := rt.Run(cctx, containerrt.RunSpec{ID: "job2-rank0", Image: containerrt.ImageName(digest[7:]), Args: []string{"/bin/busybox", "sleep", "600"}, Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
		done <- err
	}()
	waitContainers(t, rt, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
	waitContainers(t, rt, 0)

	// A container whose runner was SIGKILLed (it died with its engine) and that the engine
	// does not record is swept with its task and snapshot; a recorded one is kept, and
	// another engine's sweep leaves it alone.
	runner := exec.Command(os.Args[0], "-test.run=^TestRunnerProcess$")
	runner.Env = append(os.Environ(), "CONTAINERRT_RUNNER="+sock, "CONTAINERRT_IMAGE="+containerrt.ImageName(digest[7:]))
	runner.Stdout, runner.Stderr = os.Stderr, os.Stderr
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	waitContainers(t, rt, 1)
	if err := runner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = runner.Wait()
	if removed, err := rt.Sweep(ctx, func(task string) bool { return task == "orphan" }); err != nil || len(removed) != 0 {
		t.Fatalf("sweep with the container recorded: removed %v, %v", removed, err)
	}
	other, err := containerrt.Open(ctx, sock, "engine-b")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if removed, err := other.Sweep(ctx, func(string) bool { return false }); err != nil || len(removed) != 0 {
		t.Fatalf("another engine's sweep: removed %v, %v; want none of engine-a's", removed, err)
	}
	removed, err := rt.Sweep(ctx, func(string) bool { return false })
	if err != nil || len(removed) != 1 || removed[0] != "orphan" {
		t.Fatalf("sweep: removed %v, %v; want the orphan", removed, err)
	}
	waitContainers(t, rt, 0)
	// A task's shim exits on its own once the task is deleted, but with containerd 1.6.20
	// one sometimes stays (seen in about 1 run in 5 under -race); containerrttest's
	// clean-up stops it. Reported, not asserted, until it is understood.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		left := containerrttest.Shims(sock)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Logf("note: shims still run 5 s after their tasks were deleted: %v", left)
			break
		}
	}
}

// TestRunnerProcess is the runner that TestImportOnceRunAndSweep kills: it runs a container
// as engine-a and blocks. It does nothing unless that test starts it.
func TestRunnerProcess(t *testing.T) {
	sock := os.Getenv("CONTAINERRT_RUNNER")
	if sock == "" {
		return
	}
	rt, err := containerrt.Open(context.Background(), sock, "engine-a")
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Run(context.Background(), containerrt.RunSpec{ID: "orphan", Image: os.Getenv("CONTAINERRT_IMAGE"),
		Args: []string{"/bin/busybox", "sleep", "600"}, Stdout: io.Discard, Stderr: io.Discard})
	t.Fatalf("the runner's container ended before the runner was killed: %v", err)
}

func waitContainers(t *testing.T, rt *containerrt.Runtime, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, err := rt.Containers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("containers %v; want %d", got, n)
		}
	}
}

// A task's container gets the device nodes of its node's GPUs (NVIDIA_VISIBLE_DEVICES) and
// the driver's control device, and not the machine's other GPUs. The "GPUs" are character
// devices made for the test (the numbers of /dev/null) in a directory of its own.
func TestTaskGetsItsNodesGPUDevices(t *testing.T) {
	sock := containerrttest.Start(t)
	archive, digest := busyboxImage(t, "1.0")
	dev := t.TempDir()
	for _, name := range []string{"nvidia0", "nvidia1", "nvidiactl"} {
		if err := unix.Mknod(filepath.Join(dev, name), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Fatal(err)
		}
	}
	var out syncbuf.Buffer
	script := fmt.Sprintf(`test -c %[1]s/nvidia1 && test -c %[1]s/nvidiactl && ! test -e %[1]s/nvidia0 && echo "devices: $NVIDIA_VISIBLE_DEVICES"`, dev)
	code, err := containerrt.RunTask(context.Background(), containerrt.Task{
		Address: sock, EngineID: "engine-gpu", Key: "job-1.0-0", Archive: archive, Hash: digest[7:],
		Args: []string{"/bin/busybox", "sh", "-c", script}, Env: []string{"NVIDIA_VISIBLE_DEVICES=1"}, DevDir: dev,
	}, &out, &out)
	if err != nil || code != 0 || out.String() != "devices: 1\n" {
		t.Fatalf("a task holding GPU 1: exit %d, %v; output:\n%s", code, err, out.String())
	}
}
