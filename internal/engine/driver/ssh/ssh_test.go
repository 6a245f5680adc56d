//go:build unix

package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// waitLimit bounds every wait on a remote task; tests assert outcomes, never durations.
const waitLimit = 15 * time.Second

// TestSSH runs every scenario against one real sshd on loopback.
func TestSSH(t *testing.T) {
	s := startSSHD(t)

	t.Run("ProbeWithKey", func(t *testing.T) {
		t.Parallel()
		info, err := Probe(testCtx(t), s.target())
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("nproc").Output()
		must(t, err)
		wantCPUs, _ := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		if info.OS != "Linux" || info.VCPUs != wantCPUs || info.MemoryGB <= 0 || info.HostKeyFingerprint != s.Fingerprint {
			t.Fatalf("got %+v, want Linux, %d vCPUs, memory > 0, host key %s", info, wantCPUs, s.Fingerprint)
		}
	})

	t.Run("ProbeWithPassword", func(t *testing.T) {
		t.Parallel()
		tg := Target{Address: s.Address, Port: s.Port, Username: s.User, Password: s.Password, HostKeyFingerprint: s.Fingerprint}
		info, err := Probe(testCtx(t), tg)
		if err != nil {
			t.Fatal(err)
		}
		if info.OS != "Linux" || info.VCPUs < 1 {
			t.Fatalf("got %+v", info)
		}
	})

	t.Run("HostKeyPinnedThenMismatch", func(t *testing.T) {
		t.Parallel()
		tg := s.target()
		info, err := Probe(testCtx(t), tg) // nothing pinned: the first key seen is returned
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(info.HostKeyFingerprint, "SHA256:") || info.HostKeyFingerprint != s.Fingerprint {
			t.Fatalf("pinned %q, want %q", info.HostKeyFingerprint, s.Fingerprint)
		}
		tg.HostKeyFingerprint = info.HostKeyFingerprint
		if _, err := Probe(testCtx(t), tg); err != nil {
			t.Fatalf("probe with the pinned key: %v", err)
		}
		wrong := "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU"
		tg.HostKeyFingerprint = wrong
		_, err = Probe(testCtx(t), tg)
		if !IsHostKeyMismatch(err) || !driver.IsPermanent(err) {
			t.Fatalf("got %v, want a host key mismatch", err)
		}
		if !strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), s.Fingerprint) {
			t.Fatalf("message %q does not show both fingerprints", err)
		}
	})

	t.Run("WrongPassword", func(t *testing.T) {
		t.Parallel()
		secret := "not-the-password-" + s.Password
		tg := Target{Address: s.Address, Port: s.Port, Username: s.User, Password: secret}
		_, err := Probe(testCtx(t), tg)
		if !IsAuthFailed(err) || !driver.IsPermanent(err) {
			t.Fatalf("got %v, want an authentication failure", err)
		}
		if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), s.User) {
			t.Fatalf("message %q leaks the password or misses the user", err)
		}
		if strings.Contains(tg.String(), secret) || strings.Contains(tg.GoString(), secret) {
			t.Fatalf("Target's String shows the password")
		}
	})

	t.Run("WrongKey", func(t *testing.T) {
		t.Parallel()
		var unused strings.Builder
		tg := s.target()
		tg.PrivateKeyPEM = newClientKey(t, "", &unused)
		_, err := Probe(testCtx(t), tg)
		if !IsAuthFailed(err) || !driver.IsPermanent(err) {
			t.Fatalf("got %v, want an authentication failure", err)
		}
		if strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Fatalf("message %q shows the key", err)
		}
	})

	t.Run("NotLinux", func(t *testing.T) {
		t.Parallel()
		tg := s.target()
		tg.PrivateKeyPEM = s.DarwinKey
		_, err := Probe(testCtx(t), tg)
		if !IsNotLinux(err) || !driver.IsPermanent(err) || !strings.Contains(err.Error(), `"Darwin"`) {
			t.Fatalf("got %v, want not Linux naming Darwin", err)
		}
	})

	t.Run("ClosedPort", func(t *testing.T) {
		t.Parallel()
		tg := s.target()
		tg.Port = s.ClosedPort(t)
		_, err := Probe(testCtx(t), tg)
		if !IsConnectionRefused(err) || !driver.IsTransient(err) {
			t.Fatalf("got %v, want connection refused", err)
		}
	})

	t.Run("UnknownHost", func(t *testing.T) {
		t.Parallel()
		// .invalid never resolves (RFC 2606).
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := Probe(ctx, Target{Address: "attached.invalid", Username: "u", Password: "p"})
		if !IsUnreachable(err) || !driver.IsTransient(err) {
			t.Fatalf("got %v, want unreachable", err)
		}
	})

	t.Run("Timeout", func(t *testing.T) {
		t.Parallel()
		// A port that accepts connections and never answers, like a host behind a
		// firewall that drops packets: the deadline ends the attempt.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				defer c.Close()
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		tg := Target{Address: "127.0.0.1", Port: l.Addr().(*net.TCPAddr).Port, Username: s.User, PrivateKeyPEM: s.KeyPEM}
		_, err = Probe(ctx, tg)
		if !IsUnreachable(err) || !driver.IsTransient(err) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want unreachable after the deadline", err)
		}
	})

	t.Run("TaskRecordsOutputAndExitCode", func(t *testing.T) {
		t.Parallel()
		tg := s.target()
		task := RemoteTask{
			Key:     "job-1.0",
			Command: []string{"sh", "-c", `echo "hello $GREETING in $(pwd)"; echo oops >&2; exit 3`},
			Env:     map[string]string{"GREETING": "it's me", "API_TOKEN": "never-on-disk-5e1f"},
		}
		must(t, Start(testCtx(t), tg, task))
		code := waitExit(t, tg, task.Key)
		if code != 3 {
			t.Fatalf("exit code %d, want 3", code)
		}
		// Environment values can be secrets: the script that held them is gone once the
		// task started.
		dir := filepath.Join(s.Home, ".mlcompute/tasks/job-1.0")
		must(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if b, err := os.ReadFile(path); err != nil || bytes.Contains(b, []byte("never-on-disk-5e1f")) {
				return fmt.Errorf("%s holds an environment value (read error: %v)", path, err)
			}
			return nil
		}))
		out, err := Output(testCtx(t), tg, task.Key, 0)
		must(t, err)
		want := "hello it's me in " + filepath.Join(s.Home, ".mlcompute/tasks/job-1.0/work") + "\noops\n"
		if string(out) != want {
			t.Fatalf("output %q, want %q", out, want)
		}
		out, err = Output(testCtx(t), tg, task.Key, 6)
		must(t, err)
		if string(out) != want[6:] {
			t.Fatalf("output from 6 %q, want %q", out, want[6:])
		}
		out, err = Output(testCtx(t), tg, task.Key, int64(len(want)))
		if err != nil || len(out) != 0 {
			t.Fatalf("output at end: %q, %v", out, err)
		}
		// Idempotent: a second Start does not run the task again.
		must(t, Start(testCtx(t), tg, task))
		if out, _ := Output(testCtx(t), tg, task.Key, 0); string(out) != want {
			t.Fatalf("after a second Start output is %q", out)
		}
		if err := Kill(testCtx(t), tg, task.Key); err != nil {
			t.Fatalf("killing an ended task: %v", err)
		}
		for _, err := range []error{
			func() error { _, _, err := Status(testCtx(t), tg, "nope"); return err }(),
			func() error { _, err := Output(testCtx(t), tg, "nope", 0); return err }(),
			Kill(testCtx(t), tg, "nope"),
		} {
			if !driver.IsNotFound(err) {
				t.Fatalf("unknown task: got %v, want not found", err)
			}
		}
		if err := Start(testCtx(t), tg, RemoteTask{Key: "../x", Command: []string{"true"}}); err == nil {
			t.Fatal("a key with a path in it was accepted")
		}
	})

	t.Run("TaskSurvivesDroppedConnection", func(t *testing.T) {
		t.Parallel()
		tg := s.target()
		c, err := Dial(testCtx(t), tg)
		must(t, err)
		ready := filepath.Join(s.Home, "survive-go")
		task := RemoteTask{Key: "survive", Command: []string{"sh", "-c",
			`echo before; while [ ! -f "$1" ]; do sleep 0.05; done; echo after; exit 7`, "sh", ready}}
		must(t, c.Start(testCtx(t), task))
		must(t, c.Close()) // the connection that started the task is gone

		tg.HostKeyFingerprint = c.HostKeyFingerprint()
		running, _, err := Status(testCtx(t), tg, task.Key)
		must(t, err)
		if !running {
			t.Fatal("task not running after its connection closed")
		}
		must(t, os.WriteFile(ready, nil, 0o644))
		if code := waitExit(t, tg, task.Key); code != 7 {
			t.Fatalf("exit code %d, want 7", code)
		}
		out, err := Output(testCtx(t), tg, task.Key, 0)
		must(t, err)
		if string(out) != "before\nafter\n" {
			t.Fatalf("output %q", out)
		}
	})

	t.Run("KillWhileTaskStarts", func(t *testing.T) {
		t.Parallel()
		tg := s.target()
		task := RemoteTask{Key: "kill-starting", Command: []string{"sleep", "300"}}
		must(t, Start(testCtx(t), tg, task))
		// As if the kill came between the start of the task and the recording of its pid.
		dir := filepath.Join(s.Home, ".mlcompute/tasks", task.Key)
		must(t, os.Rename(filepath.Join(dir, "pid"), filepath.Join(dir, "pid.later")))
		ctx := testCtx(t)
		killed := make(chan error, 1)
		go func() { killed <- Kill(ctx, tg, task.Key) }()
		for deadline := time.Now().Add(waitLimit); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(dir, "cancelled")); err == nil {
				break
			}
			select {
			case err := <-killed:
				running, _, serr := Status(testCtx(t), tg, task.Key)
				t.Fatalf("Kill returned (%v) before the task's pid was recorded; the task is running: %v (%v)", err, running, serr)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatal("Kill never marked the starting task cancelled")
			}
		}
		must(t, os.Rename(filepath.Join(dir, "pid.later"), filepath.Join(dir, "pid")))
		must(t, <-killed)
		running, code, err := Status(testCtx(t), tg, task.Key)
		must(t, err)
		if running || code != 128+int(syscall.SIGTERM) {
			t.Fatalf("after Kill: running=%v code=%d, want ended with %d", running, code, 128+int(syscall.SIGTERM))
		}
	})

	t.Run("TaskFromBeforeARebootIsLostAndNeverSignalled", func(t *testing.T) {
		t.Parallel()
		tg := s.target()
		task := RemoteTask{Key: "before-reboot", Command: []string{"sleep", "300"}}
		must(t, Start(testCtx(t), tg, task))
		dir := filepath.Join(s.Home, ".mlcompute/tasks", task.Key)
		raw, err := os.ReadFile(filepath.Join(dir, "pid"))
		must(t, err)
		pgid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		must(t, err)
		t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
		if running, _, err := Status(testCtx(t), tg, task.Key); err != nil || !running {
			t.Fatalf("before: running=%v, %v; want running", running, err)
		}
		// As after a reboot: the recorded pids are still in use (here by the task itself,
		// standing in for whatever process got the numbers), but by another boot's processes.
		must(t, os.WriteFile(filepath.Join(dir, "boot_id"), []byte("00000000-0000-0000-0000-000000000000\n"), 0o600))
		if running, code, err := Status(testCtx(t), tg, task.Key); err != nil || running || code != ExitLost {
			t.Fatalf("after a reboot: running=%v code=%d, %v; want lost (%d)", running, code, err, ExitLost)
		}
		c, err := Dial(testCtx(t), tg)
		must(t, err)
		defer c.Close()
		if running, code, err := c.Wait(testCtx(t), task.Key); err != nil || running || code != ExitLost {
			t.Fatalf("wait after a reboot: running=%v code=%d, %v; want lost (%d)", running, code, err, ExitLost)
		}
		keys, err := c.RunningTasks(testCtx(t), task.Key)
		must(t, err)
		if len(keys) != 0 {
			t.Fatalf("running tasks after a reboot: %v; want none", keys)
		}
		must(t, Kill(testCtx(t), tg, task.Key))
		if err := syscall.Kill(-pgid, 0); err != nil {
			t.Fatalf("Kill signalled process group %d, which a reboot gave to another process (%v)", pgid, err)
		}
	})

	t.Run("KillKillsProcessGroup", func(t *testing.T) {
		t.Parallel()
		tg := s.target()
		task := RemoteTask{Key: "kill-me", Command: []string{"sh", "-c", `sleep 300 & sleep 300 & echo started; wait`}}
		must(t, Start(testCtx(t), tg, task))
		dir := filepath.Join(s.Home, ".mlcompute/tasks", task.Key)
		raw, err := os.ReadFile(filepath.Join(dir, "pid"))
		must(t, err)
		pgid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		must(t, err)
		deadline := time.Now().Add(waitLimit)
		for groupSize(t, pgid) < 3 { // sh and its two sleeps
			if time.Now().After(deadline) {
				t.Fatalf("process group %d never had 3 members", pgid)
			}
			time.Sleep(20 * time.Millisecond)
		}
		must(t, Kill(testCtx(t), tg, task.Key))
		if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("process group %d still exists after Kill (%v)", pgid, err)
		}
		running, code, err := Status(testCtx(t), tg, task.Key)
		must(t, err)
		if running || code != 128+int(syscall.SIGTERM) {
			t.Fatalf("after Kill: running=%v code=%d, want ended with %d", running, code, 128+int(syscall.SIGTERM))
		}
	})
}

// groupSize counts the live processes of process group pgid on this machine (the sshd is
// local, so the remote processes are visible here).
func groupSize(t *testing.T, pgid int) int {
	t.Helper()
	out, err := exec.Command("ps", "-e", "-o", "pgid=,stat=").Output()
	must(t, err)
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == strconv.Itoa(pgid) && !strings.HasPrefix(f[1], "Z") {
			n++
		}
	}
	return n
}

// waitExit polls Status over fresh connections until the task ends and returns its code.
func waitExit(t *testing.T, tg Target, key string) int {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		running, code, err := Status(testCtx(t), tg, key)
		must(t, err)
		if !running {
			return code
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still running after %s", key, waitLimit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// A wait's heartbeat newlines are not kept, however long it lasts; the status after them is.
func TestHeartbeatSkipperKeepsOnlyTheStatus(t *testing.T) {
	var w heartbeatSkipper
	for range 1000 {
		if n, err := w.Write([]byte("\n")); n != 1 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	_, _ = w.Write([]byte("\n\nexited\n"))
	_, _ = w.Write([]byte("3\n"))
	if got := w.String(); got != "exited\n3\n" {
		t.Fatalf("kept %q; want the status alone", got)
	}
}
