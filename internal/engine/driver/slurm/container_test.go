//go:build linux

package slurm

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt/containerrttest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/slurm/slurmtest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/imagearchive/imagearchivetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent"
)

// TestMain makes this test binary the engine's binary the driver's ContainerRunner copies
// to the work dir: run as container-run, it is that command.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == nodeagent.ContainerRunCommand {
		os.Exit(nodeagent.ContainerRunMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// A task with an image runs in it as a step of its node's job: the engine's binary and the
// archive are copied once into the work dir the nodes share, and the step runs the command
// in the image with the node's containerd, in the task's working directory, where its
// output is fetched from. A driver without a runner refuses such a task permanently.
func TestSlurmContainerTask(t *testing.T) {
	c := slurmtest.Start(t)
	sock := containerrttest.Start(t)
	archive := filepath.Join(t.TempDir(), "image.tar")
	digest := imagearchivetest.Busybox(t, archive, "mlctest:5.0", imagearchivetest.Layer{"etc/os-release": "ID=mlctest\nVERSION_ID=5.0\n"})
	spec := driver.TaskSpec{
		Key: "job-1", Env: map[string]string{"RANK": "0", containerrt.AddressEnv: sock},
		Outputs:   []driver.TaskOutput{{Path: "outputs"}},
		Command:   []string{"/bin/busybox", "sh", "-c", `/bin/busybox cp /etc/os-release outputs/; /bin/busybox grep VERSION_ID /etc/os-release; echo "rank $RANK"`},
		Container: &driver.TaskContainer{Archive: archive, Hash: digest[len("sha256:"):]},
	}
	ctx := ctxT(t)

	plain := newTestDriver(t, Config{})
	createReady(t, plain, driver.NodeSpec{Key: "plain", Owner: "ws/c"})
	if err := plain.StartTask(ctx, "plain", spec); !driver.IsPermanent(err) || !strings.Contains(err.Error(), "container image") {
		t.Fatalf("a container task on a driver without a runner: %v; want a permanent error", err)
	}
	if err := plain.Terminate(ctx, "plain"); err != nil {
		t.Fatal(err)
	}

	// runc keeps every containerd's containers of a namespace in one directory of the
	// machine, by the ids the engine id makes: an id of this run's own keeps two runs of
	// this test (two checkouts on one machine) apart.
	engineID := fmt.Sprintf("e-%016x", rand.Uint64())
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d := newTestDriver(t, Config{Containers: &ssh.ContainerRunner{Binary: exe, Args: []string{nodeagent.ContainerRunCommand}, EngineID: engineID}})
	createReady(t, d, driver.NodeSpec{Key: "gpu", Owner: "ws/c"})
	if err := d.StartTask(ctx, "gpu", spec); err != nil {
		t.Fatal(err)
	}
	ev := waitEvent(t, d, "TaskExited", func(ev driver.Event) bool { return ev.Kind == driver.TaskExited && ev.TaskKey == "job-1" })
	out, err := d.TaskOutput(ctx, "gpu", "job-1", 0)
	if err != nil || ev.ExitCode != 0 || string(out) != "VERSION_ID=5.0\nrank 0\n" {
		t.Fatalf("container task on a Slurm node: exit %d, output %q, %v; want 0 and the image's version", ev.ExitCode, out, err)
	}
	rc, err := d.FetchOutput(ctx, "gpu", "job-1", "outputs")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !strings.Contains(string(got), "VERSION_ID=5.0") {
		t.Fatalf("the task's output holds no os-release of the image: %q, %v", got, err)
	}

	// A killed task stops its container: its step gets SIGTERM (not srun, which would
	// cancel the step at once), and container-run stops and removes the container before
	// the step ends.
	sleeper := spec
	sleeper.Key, sleeper.Outputs = "job-2", nil
	sleeper.Command = []string{"/bin/busybox", "sh", "-c", "echo up; exec /bin/busybox sleep 600"}
	if err := d.StartTask(ctx, "gpu", sleeper); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(50 * time.Millisecond) {
		if out, _ := d.TaskOutput(ctx, "gpu", "job-2", 0); strings.Contains(string(out), "up") {
			break
		}
		if time.Now().After(deadline) {
			out, oerr := d.TaskOutput(ctx, "gpu", "job-2", 0)
			st, serr := d.TaskStatus(ctx, "gpu", "job-2")
			t.Fatalf("the task never started in its container: status %+v (%v), output %q (%v)", st, serr, out, oerr)
		}
	}
	killedAt := time.Now()
	if err := d.KillTask(ctx, "gpu", "job-2"); err != nil {
		t.Fatal(err)
	}
	ev = waitEvent(t, d, "TaskExited of the killed task", func(ev driver.Event) bool { return ev.Kind == driver.TaskExited && ev.TaskKey == "job-2" })
	rt, err := containerrt.Open(context.Background(), sock, engineID)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if left, err := rt.Containers(context.Background()); err != nil || len(left) != 0 {
		t.Fatalf("containers %s after the step was killed (exit %d): %v, %v; want none", time.Since(killedAt).Round(time.Millisecond), ev.ExitCode, left, err)
	}
	if ev.ExitCode == 0 {
		t.Fatalf("a killed task exited 0")
	}
	if err := d.Terminate(ctx, "gpu"); err != nil {
		t.Fatal(err)
	}
	if jobs := c.Jobs(); len(jobs) > 0 {
		t.Fatalf("squeue still shows %v", jobs)
	}
}
