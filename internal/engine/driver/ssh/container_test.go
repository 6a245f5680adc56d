//go:build linux

package ssh

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt/containerrttest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/imagearchive/imagearchivetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent"
)

// TestMain makes this test binary the engine's binary a ContainerRunner copies to machines:
// run as container-run, it is that command.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == nodeagent.ContainerRunCommand {
		os.Exit(nodeagent.ContainerRunMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// A task with an image runs in it on an attached machine: the engine's binary and the
// archive are copied there once, the machine's containerd (named by the task's
// environment) imports the image, and the command runs in the task's working directory, as
// the machine's login, reading a file only the image has and writing an output the driver
// fetches. A second task finds both copies and the image there. A driver without a runner
// refuses such a task permanently.
func TestContainerTasksRunInTheMachinesContainerd(t *testing.T) {
	s := startSSHD(t)
	sock := containerrttest.StartForGroup(t, s.GID)
	archive := filepath.Join(t.TempDir(), "image.tar")
	digest := imagearchivetest.Busybox(t, archive, "mlctest:4.2", imagearchivetest.Layer{"etc/os-release": "ID=mlctest\nVERSION_ID=4.2\n"})
	ts := &targets{m: map[string]Target{"vm-a": s.target()}}
	task := func(key string) driver.TaskSpec {
		return driver.TaskSpec{
			Key: key, Env: map[string]string{"RANK": "0", containerrt.AddressEnv: sock},
			Outputs: []driver.TaskOutput{{Path: "outputs"}}, CodeDir: t.TempDir(),
			Command:   []string{"/bin/busybox", "sh", "-c", `/bin/busybox cp /etc/os-release outputs/; echo "rank $RANK uid $(/bin/busybox id -u) in $PWD"`},
			Container: &driver.TaskContainer{Archive: archive, Hash: digest[len("sha256:"):]},
		}
	}

	plain := newTestDriver(t, ts)
	_, err := plain.Create(testCtx(t), driver.NodeSpec{Key: "vm-a", Owner: "ws/vm"})
	must(t, err)
	if err := plain.StartTask(testCtx(t), "vm-a", task("job-0")); !driver.IsPermanent(err) || !strings.Contains(err.Error(), "container image") {
		t.Fatalf("a container task on a driver without a runner: %v; want a permanent error", err)
	}

	// runc keeps every containerd's containers of a namespace in one directory of the
	// machine, by the ids the engine id makes: an id of this run's own keeps two runs of
	// this test (two checkouts on one machine) apart.
	engineID := fmt.Sprintf("e-%016x", rand.Uint64())
	exe, err := os.Executable()
	must(t, err)
	d := NewDriver(DriverConfig{Lookup: ts.lookup, Containers: &ContainerRunner{Binary: exe, Args: []string{nodeagent.ContainerRunCommand}, EngineID: engineID}})
	t.Cleanup(func() { d.Close() })
	_, err = d.Create(testCtx(t), driver.NodeSpec{Key: "vm-a", Owner: "ws/vm"})
	must(t, err)
	bin := filepath.Join(s.Home, ".mlcompute", "bin")
	var copied []time.Time // the copies' modification times after each task
	for i, key := range []string{"job-1", "job-2"} {
		must(t, d.StartTask(testCtx(t), "vm-a", task(key)))
		ev := nextExit(t, d, key)
		out, err := d.TaskOutput(testCtx(t), "vm-a", key, 0)
		must(t, err)
		work := filepath.Join(s.Home, ".mlcompute", "code", "vm-a."+key)
		if want := "rank 0 uid " + strconv.Itoa(s.UID) + " in " + work + "\n"; ev.ExitCode != 0 || string(out) != want {
			t.Fatalf("task %s: exit %d, output %q; want 0 and %q", key, ev.ExitCode, out, want)
		}
		rc, err := d.FetchOutput(testCtx(t), "vm-a", key, "outputs")
		must(t, err)
		got, err := io.ReadAll(rc)
		rc.Close()
		must(t, err)
		if !strings.Contains(string(got), "VERSION_ID=4.2") {
			t.Fatalf("task %s: its output holds no os-release of the image:\n%q", key, got)
		}
		copies, err := os.ReadDir(bin)
		must(t, err)
		images, err := os.ReadDir(filepath.Join(s.Home, ".mlcompute", "images"))
		must(t, err)
		if len(copies) != 1 || len(images) != 1 {
			t.Fatalf("after task %d the machine holds %d copies of the binary and %d archives; want one of each", i+1, len(copies), len(images))
		}
		for _, e := range []os.DirEntry{copies[0], images[0]} {
			fi, err := e.Info()
			must(t, err)
			copied = append(copied, fi.ModTime())
		}
	}
	if !copied[0].Equal(copied[2]) || !copied[1].Equal(copied[3]) {
		t.Fatalf("the second task copied the binary or the archive again: modified at %v, then %v", copied[:2], copied[2:])
	}
	rt, err := containerrt.Open(context.Background(), sock, engineID)
	must(t, err)
	defer rt.Close()

	// A killed task stops its container and removes it before the driver's SIGKILL.
	sleeper := task("job-3")
	sleeper.Command = []string{"/bin/busybox", "sh", "-c", "echo up; exec /bin/busybox sleep 600"}
	must(t, d.StartTask(testCtx(t), "vm-a", sleeper))
	for out := []byte{}; !strings.Contains(string(out), "up"); out, _ = d.TaskOutput(testCtx(t), "vm-a", "job-3", 0) {
		if testCtx(t).Err() != nil {
			t.Fatalf("the task never started in its container:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	killed := time.Now()
	must(t, d.KillTask(testCtx(t), "vm-a", "job-3"))
	ev := nextExit(t, d, "job-3")
	if left, err := rt.Containers(context.Background()); err != nil || len(left) != 0 {
		t.Fatalf("containers after the kill (exit %d after %s): %v, %v; want none", ev.ExitCode, time.Since(killed).Round(time.Millisecond), left, err)
	}
	hashes, err := rt.ImportedHashes(context.Background())
	must(t, err)
	if want := digest[len("sha256:"):]; len(hashes) != 1 || hashes[0] != want {
		t.Fatalf("images imported: %v; want the archive's alone (%s)", hashes, want)
	}
}
