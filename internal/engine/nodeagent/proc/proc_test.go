//go:build unix

package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const waitLimit = 15 * time.Second

func startSleep(t *testing.T, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	return cmd
}

func TestWaitReturnsWhenTheProcessExits(t *testing.T) {
	cmd := startSleep(t)
	p, err := Open(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Exited() {
		t.Fatal("a running process has not exited")
	}
	st, err := ReadStat(cmd.Process.Pid)
	if err != nil || st.Pgid != cmd.Process.Pid || !Alive(cmd.Process.Pid) {
		t.Fatalf("stat %+v %v", st, err)
	}
	if err := p.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if !p.Exited() {
		t.Fatal("Exited is false after Wait")
	}
	if err := p.Signal(unix.SIGKILL); err != nil {
		t.Fatalf("signalling an exited process: %v", err)
	}
}

func TestWaitHonoursContext(t *testing.T) {
	cmd := startSleep(t)
	p, err := Open(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Wait(ctx) }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
}

func TestOpenMissingProcess(t *testing.T) {
	if _, err := Open(0); !errors.Is(err, ErrGone) {
		t.Fatalf("pid 0: %v", err)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(cmd.Process.Pid); !errors.Is(err, ErrGone) {
		t.Fatalf("reaped pid: %v", err)
	}
}

func TestKillByEnvFindsOnlyMarkedProcesses(t *testing.T) {
	marker := "mlc-proc-test-" + strconv.Itoa(os.Getpid())
	marked := startSleep(t, "MLC_PROC_TEST="+marker)
	other := startSleep(t, "MLC_PROC_TEST=other")
	found, err := FindByEnv("MLC_PROC_TEST", marker)
	if err != nil || len(found) != 1 || found[0].Pid != marked.Process.Pid {
		t.Fatalf("found %+v %v", found, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	n, err := KillByEnv(ctx, "MLC_PROC_TEST", marker)
	if err != nil || n != 1 {
		t.Fatalf("killed %d, %v", n, err)
	}
	if Alive(marked.Process.Pid) {
		t.Fatal("marked process survived")
	}
	if !Alive(other.Process.Pid) {
		t.Fatal("unmarked process was killed")
	}
	if cl, err := Cmdline(other.Process.Pid); err != nil || len(cl) != 2 || cl[0] != "sleep" {
		t.Fatalf("cmdline %q %v", cl, err)
	}
}
