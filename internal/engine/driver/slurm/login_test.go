//go:build unix

package slurm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/slurm/slurmtest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh/sshtest"
)

// confShell runs every command of a login shell with SLURM_CONF set: a real login node
// has its slurm.conf where Slurm's commands look, the test's login (a throwaway user on
// this machine) needs to be told.
type confShell struct {
	inner ssh.Shell
	conf  string
}

func (s confShell) RunShell(ctx context.Context, cmd string, stdin io.Reader, stdout io.Writer) ([]byte, int, error) {
	return s.inner.RunShell(ctx, "SLURM_CONF="+shellQuote(s.conf)+"; export SLURM_CONF; "+cmd, stdin, stdout)
}

// TestLoginNode runs the driver with --slurm-login: every Slurm command, the task wrapper
// and the sessions go over SSH to a login node (a real sshd on loopback, see sshtest, as a
// user of its own), which submits to the test cluster as that user.
func TestLoginNode(t *testing.T) {
	c := slurmtest.Start(t)
	t.Setenv(sshtest.NoNetnsEnv, "1") // the login node must reach slurmctld on this machine's loopback
	h := sshtest.Start(t)
	keyFile := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(keyFile, []byte(h.KeyPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	login := fmt.Sprintf("%s@%s:%d", h.User, h.Address, h.Port)
	ls, err := newLoginShell(login, keyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	d := newTestDriver(t, Config{Login: login, Workdir: h.Home, shell: confShell{inner: ls, conf: c.Conf}})
	ctx := ctxT(t)
	createReady(t, d, driver.NodeSpec{Key: "viaLogin", Owner: "ws/c"})
	if jobs := strings.Join(c.Jobs(), "\n"); !strings.Contains(jobs, "/viaLogin RUNNING") {
		t.Fatalf("squeue shows %s", jobs)
	}
	task := driver.TaskSpec{Key: "t", Command: []string{"sh", "-c", `echo "$(id -un) $GREETING"; exit 6`}, Env: map[string]string{"GREETING": "hello"}}
	if err := d.StartTask(ctx, "viaLogin", task); err != nil {
		t.Fatal(err)
	}
	ev := waitEvent(t, d, "TaskExited", func(ev driver.Event) bool { return ev.Kind == driver.TaskExited && ev.TaskKey == "t" })
	out, err := d.TaskOutput(ctx, "viaLogin", "t", 0)
	if ev.ExitCode != 6 || err != nil || string(out) != h.User+" hello\n" {
		t.Fatalf("task via the login node: exit %d, output %q, %v; want 6 and %q", ev.ExitCode, out, err, h.User+" hello\n")
	}
	// A task's code and inputs (an endpoint's model is one) are copied in over the login
	// node's SSH connection before it starts: nothing is shared with this machine.
	codeDir, modelDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(codeDir, "score.txt"), []byte("code\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(modelDir, "MODEL"), []byte("weights\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := driver.TaskSpec{Key: "files", CodeDir: codeDir, Inputs: []driver.TaskInput{{Src: modelDir, Dest: "model"}},
		Command: []string{"sh", "-c", `cat score.txt "$` + driver.WorkDirEnv + `/model/MODEL"; case "$PWD" in "$HOME"/*) echo on-login-home;; esac`}}
	if err := d.StartTask(ctx, "viaLogin", files); err != nil {
		t.Fatal(err)
	}
	ev = waitEvent(t, d, "TaskExited", func(ev driver.Event) bool { return ev.Kind == driver.TaskExited && ev.TaskKey == "files" })
	if out, err := d.TaskOutput(ctx, "viaLogin", "files", 0); ev.ExitCode != 0 || err != nil || string(out) != "code\nweights\non-login-home\n" {
		t.Fatalf("a task with code and a model input via the login node: exit %d, output %q, %v", ev.ExitCode, out, err)
	}
	var session bytes.Buffer
	code, err := d.Exec(ctx, "viaLogin", driver.ExecSpec{Command: []string{"sh", "-c", "cat; exit 2"}, Stdin: strings.NewReader("typed\n"), Output: &session})
	if err != nil || code != 2 || session.String() != "typed\n" {
		t.Fatalf("Exec via the login node: %d, %q, %v", code, session.String(), err)
	}
	if err := d.Terminate(ctx, "viaLogin"); err != nil {
		t.Fatal(err)
	}
	if jobs := c.Jobs(); len(jobs) > 0 {
		t.Fatalf("after Terminate squeue shows %v", jobs)
	}
	if left, _ := filepath.Glob(filepath.Join(h.Home, ".mlcompute", "tasks", "viaLogin.*")); len(left) > 0 {
		t.Fatalf("task directories left on the login node: %v", left)
	}
}

// --slurm-login trusts the login node's host key on first use and pins it, in the file a
// restarted engine reads: the same login node is accepted again, and one that presents
// another key is refused, naming the file, which keeps the pin.
func TestLoginHostKeyIsPinnedOnFirstUse(t *testing.T) {
	h := sshtest.Start(t)
	login := fmt.Sprintf("%s@%s:%d", h.User, h.Address, h.Port)
	pin := filepath.Join(t.TempDir(), "slurm-login-host-key")
	run := func() error {
		ls, err := newLoginShell(login, h.KeyFile(t), pin)
		if err != nil {
			t.Fatal(err)
		}
		_, code, err := ls.RunShell(context.Background(), "exit 0", nil, io.Discard)
		if err == nil && code != 0 {
			t.Fatalf("exit 0 on the login node: exit status %d", code)
		}
		return err
	}
	if err := run(); err != nil {
		t.Fatalf("first connection: %v", err)
	}
	if raw, err := os.ReadFile(pin); err != nil || strings.TrimSpace(string(raw)) != h.Fingerprint {
		t.Fatalf("pinned %q (%v); want the login node's key %s", raw, err, h.Fingerprint)
	}
	if err := run(); err != nil {
		t.Fatalf("a restarted engine's connection to the same login node: %v", err)
	}

	other := "SHA256:" + strings.Repeat("A", 43) // a key this login node does not have
	if err := os.WriteFile(pin, []byte(other+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run()
	if !ssh.IsHostKeyMismatch(err) || !driver.IsPermanent(err) || !strings.Contains(err.Error(), pin) {
		t.Fatalf("a login node whose key is not the pinned one: %v; want a permanent host key mismatch naming %s", err, pin)
	}
	if raw, _ := os.ReadFile(pin); strings.TrimSpace(string(raw)) != other {
		t.Fatalf("the refused connection changed the pin to %q", raw)
	}
}
