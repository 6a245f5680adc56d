//go:build unix

package ssh

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// shellHere runs the task scripts on this machine, as the Slurm driver's shell does.
type shellHere struct{}

func (shellHere) RunShell(ctx context.Context, cmd string, stdin io.Reader, stdout io.Writer) ([]byte, int, error) {
	var stderr bytes.Buffer
	c := exec.CommandContext(ctx, "sh", "-c", cmd)
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, &stderr
	err := c.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return stderr.Bytes(), exit.ExitCode(), nil
	}
	return stderr.Bytes(), 0, err
}

// A task launched elsewhere: Start writes its files and returns without running it (it is
// running to Status meanwhile); the wrapper command runs it, as a container of another
// image does on a Kubernetes pod.
func TestStartLeavesTheLaunchToItsCaller(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "tasks")
	store := TaskStore{Shell: shellHere{}, Dir: dir}
	err := store.Start(ctx, RemoteTask{Key: "job-0", Command: []string{"sh", "-c", `echo "rank $RANK"`}, Env: map[string]string{"RANK": "0"}, LaunchedElsewhere: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "job-0", "wrapper.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the wrapper ran in Start (wrapper.pid: %v); want it left to the caller", err)
	}
	if running, _, err := store.Status(ctx, "job-0"); err != nil || !running {
		t.Fatalf("Status before the launch: running %v, %v; want running", running, err)
	}
	argv := WrapperCommand(dir, "job-0")
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("the wrapper command %v: %v: %s", argv, err, out)
	}
	running, code, err := store.Status(ctx, "job-0")
	if err != nil || running || code != 0 {
		t.Fatalf("Status after the wrapper: running %v, exit %d, %v; want exited 0", running, code, err)
	}
	if out, err := store.Output(ctx, "job-0", 0); err != nil || string(out) != "rank 0\n" {
		t.Fatalf("Output: %q, %v", out, err)
	}
	// A task whose wrapper ran is not failed afterwards.
	if err := store.FailUnlaunched(ctx, "job-0", "too late"); err != nil {
		t.Fatal(err)
	}
	if _, code, _ := store.Status(ctx, "job-0"); code != 0 {
		t.Fatalf("FailUnlaunched changed the exit status of a task that ran to %d", code)
	}
}

// A task whose wrapper never runs (its container cannot start) ends with 127 and the
// reason in its output; a launch that comes later does not run it.
func TestFailUnlaunchedEndsATaskThatNeverStarted(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "tasks")
	store := TaskStore{Shell: shellHere{}, Dir: dir}
	if err := store.Start(ctx, RemoteTask{Key: "job-1", Command: []string{"touch", "ran"}, LaunchedElsewhere: true}); err != nil {
		t.Fatal(err)
	}
	if err := store.FailUnlaunched(ctx, "job-1", "the image cannot be pulled: ImagePullBackOff"); err != nil {
		t.Fatal(err)
	}
	running, code, err := store.Status(ctx, "job-1")
	if err != nil || running || code != 127 {
		t.Fatalf("Status: running %v, exit %d, %v; want exited 127", running, code, err)
	}
	out, err := store.Output(ctx, "job-1", 0)
	if err != nil || !strings.Contains(string(out), "mlcompute: the image cannot be pulled: ImagePullBackOff") {
		t.Fatalf("Output: %q, %v; want the reason", out, err)
	}
	// The container started after all (the kubelet's next pull worked): the task stays
	// failed and does not run.
	argv := WrapperCommand(dir, "job-1")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = t.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the wrapper command %v: %v: %s", argv, err, out)
	}
	if _, code, _ := store.Status(ctx, "job-1"); code != 127 {
		t.Fatalf("a late launch changed the exit status to %d; want 127", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "job-1", "work", "ran")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a late launch ran the failed task (%v)", err)
	}
	if err := store.FailUnlaunched(ctx, "no-such-task", "x"); !driver.IsNotFound(err) {
		t.Fatalf("FailUnlaunched of a missing task: %v; want not found", err)
	}
}
