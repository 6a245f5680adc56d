package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/syncbuf"
	clocktesting "k8s.io/utils/clock/testing"
)

// serveDirEnv makes the test binary serve that data dir (TestMain), as a real engine
// process the tests can kill.
const serveDirEnv = "MLCOMPUTE_TEST_SERVE_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(serveDirEnv); dir != "" {
		err := Run(context.Background(), Options{DataDir: dir, AgentArgv: testAgentArgv})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// An engine started right after the previous one was killed with SIGKILL is never refused
// with "already running": the kernel may still hold the dead engine's lock for a moment,
// and the killed process stays a zombie (nobody reaps it here, as on machines whose init
// does not), which must count as dead. Each round kills a real engine process and starts
// the next one at once.
func TestRestartRightAfterSIGKILL(t *testing.T) {
	dir := shortDir(t)
	sock := filepath.Join(dir, SocketFile)
	var zombies []*exec.Cmd
	t.Cleanup(func() {
		for _, cmd := range zombies {
			_ = cmd.Wait()
		}
	})
	for round := range 10 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), serveDirEnv+"="+dir)
		var stderr syncbuf.Buffer // what the engine says if it cannot start
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		zombies = append(zombies, cmd)
		c := mustClient(t, "unix://"+sock, "")
		// Generous: a CI machine busy with other tests' disks can take seconds to open a store.
		deadline := time.Now().Add(30 * time.Second)
		for {
			st, err := c.Status(context.Background())
			if err == nil && st.PID == cmd.Process.Pid {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: engine %d did not serve: %v; its stderr:\n%s", round, cmd.Process.Pid, err, stderr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// Not reaped: it stays a zombie while the next engine starts.
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, Options{DataDir: dir, AgentArgv: testAgentArgv, Ready: func(string) { close(ready) }})
		}()
		select {
		case <-ready:
		case err := <-done:
			cancel()
			if errors.Is(err, ErrAlreadyRunning) {
				t.Fatalf("round %d: restart right after SIGKILL refused: %v", round, err)
			}
			t.Fatalf("round %d: restart failed: %v", round, err)
		case <-time.After(15 * time.Second):
			cancel()
			t.Fatalf("round %d: restart did not serve", round)
		}
		if st, err := client.New("unix://"+sock, ""); err == nil {
			if s, err := st.Status(context.Background()); err != nil || s.PID != os.Getpid() {
				t.Fatalf("round %d: status after restart = %+v, %v", round, s, err)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("round %d: stopping: %v", round, err)
		}
	}
}

// An embedded engine that cannot start because its store is damaged is reported with the
// engine's one-line reason (naming the file and the backup to restore), not only "see the
// log".
func TestLauncherReportsADamagedStore(t *testing.T) {
	dir := shortDir(t)
	junk := make([]byte, 64<<10)
	for i := range junk {
		junk[i] = byte(i * 7)
	}
	if err := os.WriteFile(filepath.Join(dir, StoreFile), junk, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(serveDirEnv, dir) // the child (this test binary) serves dir
	// The launcher's clock never moves: it may not wait out a timeout to learn that the
	// engine it started exited (the context only keeps a regression from hanging).
	l := &Launcher{DataDir: dir, Command: []string{os.Args[0]}, Clock: clocktesting.NewFakeClock(time.Now())}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := l.Ensure(ctx)
	if err == nil {
		t.Fatal("an engine started on a damaged store")
	}
	for _, want := range []string{filepath.Join(dir, StoreFile), "is damaged", "backup"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Ensure = %v; want it to say %q", err, want)
		}
	}
}

// Connect calls an engine whose socket is there without checking its health first; when
// the socket is stale (the engine died), the first call, even one that is never retried
// (POST /v1/shutdown), starts the embedded engine and goes through once.
func TestConnectWithAStaleSocketStartsTheEngine(t *testing.T) {
	dir := shortDir(t)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, SocketFile), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()                 // the socket file stays, and nothing listens on it
	t.Setenv(serveDirEnv, dir) // the launched test binary serves dir (TestMain)

	c, err := Connect(context.Background(), ConnectOptions{DataDir: dir, Command: []string{os.Args[0], "-test.run=^$"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The first call cannot connect; it starts the engine and is sent once.
	if err := c.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown through a stale socket: %v", err)
	}
	// The started engine got it and stops.
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := net.Dial("unix", filepath.Join(dir, SocketFile))
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("the started engine did not shut down")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
