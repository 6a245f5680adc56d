package daemon

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// testAgentArgv names a node agent; these tests create no compute, so it never runs.
var testAgentArgv = []string{"mlcompute", "node-agent"}

type fakeWork struct{ busy bool }

func (f *fakeWork) HasWork() bool { return f.busy }

func newWatcher(t *testing.T, idleExit time.Duration) (*watcher, *clocktesting.FakeClock, *fakeWork) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var last atomic.Int64
	last.Store(clk.Now().UnixNano())
	work := &fakeWork{}
	dir := t.TempDir()
	open, err := os.Open(dir) // as Run keeps it open
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { open.Close() })
	fi, err := open.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return &watcher{dataDir: dir, dirInfo: fi, idleExit: idleExit, clock: clk, engine: work, lastCall: &last}, clk, work
}

func TestIdleExitAfterQuietPeriodWithNothingToManage(t *testing.T) {
	w, clk, _ := newWatcher(t, 10*time.Minute)
	clk.Step(10*time.Minute - time.Second)
	if reason := w.check(); reason != "" {
		t.Fatalf("stopped early: %s", reason)
	}
	clk.Step(time.Second)
	if reason := w.check(); !strings.Contains(reason, "idle") {
		t.Fatalf("reason = %q; want an idle exit at 10m", reason)
	}
}

func TestAPICallResetsIdleTimer(t *testing.T) {
	w, clk, _ := newWatcher(t, 10*time.Minute)
	clk.Step(9 * time.Minute)
	w.lastCall.Store(clk.Now().UnixNano())
	clk.Step(9 * time.Minute)
	if reason := w.check(); reason != "" {
		t.Fatalf("stopped 9m after the last call: %s", reason)
	}
}

func TestWorkKeepsEngineUp(t *testing.T) {
	w, clk, work := newWatcher(t, 10*time.Minute)
	work.busy = true
	clk.Step(time.Hour)
	if reason := w.check(); reason != "" {
		t.Fatalf("stopped with work to manage: %s", reason)
	}
	work.busy = false
	if reason := w.check(); reason == "" {
		t.Fatal("did not stop once the work was gone")
	}
}

func TestIdleExitZeroMeansNever(t *testing.T) {
	w, clk, _ := newWatcher(t, 0)
	clk.Step(1000 * time.Hour)
	if reason := w.check(); reason != "" {
		t.Fatalf("stopped with idle exit disabled: %s", reason)
	}
}

func TestDeletedDataDirStopsAtOnce(t *testing.T) {
	w, _, work := newWatcher(t, 0)
	work.busy = true
	if err := os.RemoveAll(w.dataDir); err != nil {
		t.Fatal(err)
	}
	if reason := w.check(); reason != "data dir deleted" {
		t.Fatalf("reason = %q; want data dir deleted", reason)
	}
}

// A data dir deleted while something still writes below it comes back at the same path as
// another directory (a node agent's MkdirAll of nodes/<node>): the engine's is gone all
// the same.
func TestDataDirMadeAgainStopsAtOnce(t *testing.T) {
	w, _, work := newWatcher(t, 0)
	work.busy = true
	if reason := w.check(); reason != "" {
		t.Fatalf("stopped with its data dir in place: %s", reason)
	}
	if err := os.RemoveAll(w.dataDir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(w.dataDir, "nodes", "n1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if reason := w.check(); reason != "data dir deleted" {
		t.Fatalf("reason = %q; want data dir deleted", reason)
	}
}

func shortDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "mlcd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startRun runs the daemon in the background and returns once it serves.
func startRun(t *testing.T, opts Options) (done chan error, cancel context.CancelFunc) {
	t.Helper()
	opts.AgentArgv = testAgentArgv
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	opts.Ready = func(addr string) { ready <- addr }
	done = make(chan error, 1)
	go func() { done <- Run(ctx, opts) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("daemon exited before serving: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("daemon did not start serving")
	}
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return done, cancel
}

func TestRunServesPrivateSocketAndHoldsLock(t *testing.T) {
	dir := shortDir(t)
	done, _ := startRun(t, Options{DataDir: dir, Version: "t"})

	sock := filepath.Join(dir, SocketFile)
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Fatalf("socket mode %o; want 600", mode)
	}
	c, _ := client.New("unix://"+sock, "")
	st, err := c.Status(context.Background())
	if err != nil || st.PID != os.Getpid() || st.DataDir != dir {
		t.Fatalf("status = %+v, %v", st, err)
	}

	// A second engine on the same data dir is refused and leaves the first one serving.
	err = Run(context.Background(), Options{DataDir: dir, AgentArgv: testAgentArgv})
	if !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second Run = %v; want ErrAlreadyRunning", err)
	}
	if _, err := c.Status(context.Background()); err != nil {
		t.Fatalf("first engine stopped answering: %v", err)
	}

	// Shutdown over the API stops it and removes the socket.
	if err := c.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		done <- nil // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("engine did not stop after shutdown")
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left behind: %v", err)
	}
}

// A TCP listener, loopback included, always requires a token: listen refuses to open one
// without, and Run without one makes a random token in the data dir (mode 0600), which a
// client on this machine finds there.
func TestTCPListenerWithoutTokenGetsOne(t *testing.T) {
	if _, err := listen(Options{Listen: "tcp://127.0.0.1:0"}); err == nil || !strings.Contains(err.Error(), "without a token") {
		t.Fatalf("listen on loopback TCP without a token = %v; want a refusal", err)
	}
	dir := shortDir(t)
	addr := startTCP(t, Options{DataDir: dir, Listen: "tcp://127.0.0.1:0"})
	ctx := context.Background()
	if _, err := mustClient(t, "http://"+addr, "").Status(ctx); !api.IsUnauthorized(err) {
		t.Fatalf("loopback call without a token: %v; want unauthorized", err)
	}
	tokenPath := filepath.Join(dir, TokenFile)
	fi, err := os.Stat(tokenPath)
	if err != nil {
		t.Fatalf("no token file: %v", err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Fatalf("token file mode %04o; want 0600", mode)
	}
	token, err := EndpointToken("http://"+addr, "", dir)
	if err != nil || len(token) < 32 {
		t.Fatalf("EndpointToken = %q, %v; want the data dir's token", token, err)
	}
	if _, err := mustClient(t, "http://"+addr, token).Status(ctx); err != nil {
		t.Fatalf("call with the data dir's token: %v", err)
	}
	// Only a loopback endpoint gets the local token; an explicit token always wins.
	if got, _ := EndpointToken("http://10.1.2.3:80", "", dir); got != "" {
		t.Errorf("EndpointToken gave the local token to a remote host")
	}
	if got, _ := EndpointToken("http://"+addr, "mine", dir); got != "mine" {
		t.Errorf("EndpointToken = %q; want the given token", got)
	}
}

// A token file group or others can read is refused, naming the fix.
func TestTokenFileReadableByOthersIsRefused(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "token")
	if err := os.WriteFile(path, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadTokenFile(path); err != nil || got != "secret" {
		t.Fatalf("ReadTokenFile of a 0600 file = %q, %v", got, err)
	}
	for _, mode := range []os.FileMode{0o640, 0o604, 0o644} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := ReadTokenFile(path)
		if err == nil || !strings.Contains(err.Error(), "chmod 600 "+path) {
			t.Errorf("ReadTokenFile of a %04o file = %v; want a refusal saying chmod 600", mode, err)
		}
	}
	// The data dir's own token file is held to the same rule.
	if err := os.WriteFile(filepath.Join(dir, TokenFile), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LocalToken(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("LocalToken with a 0644 file = %v; want a refusal", err)
	}
}

// A data dir that existed with loose modes is made private: the dir, its nodes,
// snapshots and artifacts dirs 0700, the store and log 0600.
func TestExistingDataDirIsMadePrivate(t *testing.T) {
	dir := shortDir(t)
	for _, sub := range []string{NodesDir, SnapshotsDir, ArtifactsDir} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, LogFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(dir, StoreFile), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, p := range []string{dir, filepath.Join(dir, NodesDir), filepath.Join(dir, SnapshotsDir), filepath.Join(dir, ArtifactsDir)} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, StoreFile), 0o644); err != nil {
		t.Fatal(err)
	}
	startRun(t, Options{DataDir: dir})
	want := map[string]os.FileMode{
		"": 0o700, NodesDir: 0o700, SnapshotsDir: 0o700, ArtifactsDir: 0o700, StoreFile: 0o600, LogFile: 0o600, LockFile: 0o600,
	}
	for name, mode := range want {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != mode {
			t.Errorf("%s: mode %04o; want %04o", filepath.Join(dir, name), got, mode)
		}
	}
}

// startTCP runs the daemon on a TCP listener and returns its address.
func startTCP(t *testing.T, opts Options) string {
	t.Helper()
	addr := make(chan string, 1)
	opts.AgentArgv = testAgentArgv
	opts.Ready = func(a string) { addr <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, opts) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case a := <-addr:
		return a
	case err := <-done:
		done <- err
		t.Fatalf("daemon exited before serving: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("daemon did not start serving")
	}
	return ""
}

func TestTCPLoopbackWithToken(t *testing.T) {
	dir := shortDir(t)
	var addr string
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{DataDir: dir, Listen: "tcp://127.0.0.1:0", Token: "tok", AgentArgv: testAgentArgv, Ready: func(a string) { addr = a; close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	if _, err := mustClient(t, "http://"+addr, "").Status(ctx); err == nil {
		t.Fatal("call without token succeeded")
	}
	if _, err := mustClient(t, "http://"+addr, "tok").Status(ctx); err != nil {
		t.Fatalf("call with token: %v", err)
	}
	cancel()
	<-done
}

func mustClient(t *testing.T, ep, token string) *client.Client {
	c, err := client.New(ep, token, client.WithAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDefaultDataDir(t *testing.T) {
	t.Setenv("MLCOMPUTE_HOME", "/srv/mlc")
	if d, _ := DefaultDataDir(); d != "/srv/mlc" {
		t.Errorf("with MLCOMPUTE_HOME: %s", d)
	}
	t.Setenv("MLCOMPUTE_HOME", "")
	t.Setenv("XDG_DATA_HOME", "/xdg")
	if d, _ := DefaultDataDir(); d != "/xdg/mlcompute" {
		t.Errorf("with XDG_DATA_HOME: %s", d)
	}
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("HOME", "/home/u")
	if d, _ := DefaultDataDir(); d != "/home/u/.local/share/mlcompute" {
		t.Errorf("default: %s", d)
	}
}

func TestIsLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{"127.0.0.1": true, "::1": true, "localhost": true, "127.9.9.9": true, "10.0.0.1": false, "example.com": false, "0.0.0.0": false} {
		if got := IsLoopbackHost(host); got != want {
			t.Errorf("IsLoopbackHost(%q) = %v", host, got)
		}
	}
}

func TestScoringAddressKeptAcrossRestarts(t *testing.T) {
	dir := shortDir(t)
	status := func() string {
		c, _ := client.New("unix://"+filepath.Join(dir, SocketFile), "")
		st, err := c.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return st.ScoringURL
	}
	_, cancel := startRun(t, Options{DataDir: dir})
	first := status()
	if !strings.HasPrefix(first, "http://127.0.0.1:") || strings.HasSuffix(first, ":0") {
		t.Fatalf("scoring URL %q; want a loopback port", first)
	}
	// The router answers on it: an unknown endpoint is 404 in the router's JSON envelope.
	res, err := http.Post(first+"/nothing/score", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("scoring an unknown endpoint: %d; want 404", res.StatusCode)
	}
	cancel()
	waitGone(t, dir)
	startRun(t, Options{DataDir: dir})
	if again := status(); again != first {
		t.Fatalf("scoring URL after restart %q; want %q kept", again, first)
	}
}

// waitGone waits until the data dir's engine released its lock.
func waitGone(t *testing.T, dir string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		f, err := acquireLock(filepath.Join(dir, LockFile))
		if err == nil {
			f.Close()
			return
		}
	}
	t.Fatal("engine did not stop")
}

// A backup over the API while the engine runs is a store that opens and holds what the
// engine held.
func TestBackupWhileRunning(t *testing.T) {
	dir := shortDir(t)
	startRun(t, Options{DataDir: dir})
	c := mustClient(t, "unix://"+filepath.Join(dir, SocketFile), "")
	ctx := context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "kept-in-backup"}); err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "backup.db")
	f, err := os.Create(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.Backup(ctx, f)
	f.Close()
	if err != nil || n == 0 {
		t.Fatalf("Backup = %d, %v", n, err)
	}
	st, err := store.Open(copyPath, time.Second)
	if err != nil {
		t.Fatalf("opening the backup: %v", err)
	}
	defer st.Close()
	var ws api.Workspace
	err = st.View(func(tx *store.Tx) error {
		ok, err := tx.Get(store.Workspaces, "kept-in-backup", &ws)
		if err == nil && !ok {
			err = errors.New("not found")
		}
		return err
	})
	if err != nil || ws.Name != "kept-in-backup" {
		t.Fatalf("workspace in the backup: %+v, %v", ws, err)
	}
}
