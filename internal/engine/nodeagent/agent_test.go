//go:build unix

package nodeagent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent/proc"
)

// The test binary doubles as the agent: `<test binary> node-agent --dir DIR` runs Run, and
// `<test binary> container-run ...` runs a task in a container.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "node-agent" {
		os.Exit(agentMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == ContainerRunCommand {
		os.Exit(ContainerRunMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	// Agents are this binary built with -race too; do not let each one sleep a second
	// at exit.
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	os.Exit(m.Run())
}

func agentMain(args []string) int {
	fs := flag.NewFlagSet("node-agent", flag.ContinueOnError)
	dir := fs.String("dir", "", "node dir")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: os.Stderr})
	if err := Run(context.Background(), *dir, logger); err != nil {
		fmt.Fprintln(os.Stderr, "node agent:", err)
		return 1
	}
	return 0
}

// waitLimit bounds every wait on a real process; tests assert outcomes, never durations.
const waitLimit = 15 * time.Second

func shortTempDir(t *testing.T) string {
	t.Helper()
	// Unix socket paths are limited to 108 bytes and t.TempDir can be long.
	dir, err := os.MkdirTemp("", "mlc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

type testAgent struct {
	dir string
	sp  *Spawned
	c   *Client
}

func agentArgv(t *testing.T) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe, "node-agent"}
}

func startAgent(t *testing.T, dir string) *testAgent {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sp, err := Spawn(agentArgv(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-sp.Ready:
		if err != nil {
			t.Fatalf("agent did not start: %v\n%s", err, readLog(dir))
		}
	case <-time.After(waitLimit):
		t.Fatalf("agent did not report ready\n%s", readLog(dir))
	}
	a := &testAgent{dir: dir, sp: sp, c: NewClient(dir)}
	t.Cleanup(func() {
		_ = sp.Cmd.Process.Signal(unix.SIGKILL)
		<-sp.Done
		_, _ = RecoverDir(context.Background(), dir, nil)
	})
	return a
}

func readLog(dir string) string {
	raw, _ := os.ReadFile(filepath.Join(dir, LogFile))
	return string(raw)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// waitExit returns once pid has exited (a zombie has), through its pidfd.
func waitExit(t *testing.T, pid int) {
	t.Helper()
	h, err := proc.Open(pid)
	if errors.Is(err, proc.ErrGone) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Wait(ctxT(t)); err != nil {
		t.Fatalf("pid %d still running: %v", pid, err)
	}
}

// waitFileInt polls for a file a task writes (a real process; bounded).
func waitFileInt(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		if raw, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(raw), "\n") {
			v, err := strconv.Atoi(strings.TrimSpace(string(raw)))
			if err == nil {
				return v
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
	return 0
}

func TestTaskRunsAndRecordsOutputAndExitCode(t *testing.T) {
	a := startAgent(t, filepath.Join(shortTempDir(t), "n1"))
	ctx := ctxT(t)
	st, err := a.c.StartTask(ctx, TaskRequest{
		Key:     "job-1/0",
		Command: []string{"sh", "-c", `echo "out $FOO"; echo "home=$HOME"; echo err >&2; exit 3`},
		Env:     map[string]string{"FOO": "bar"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Pid == 0 || st.Pgid != st.Pid {
		t.Fatalf("want the task leading its own process group, got %+v", st)
	}
	end, err := a.c.Wait(ctx, "job-1/0")
	if err != nil {
		t.Fatal(err)
	}
	if end.Running || end.ExitCode != 3 {
		t.Fatalf("want exit 3, got %+v", end)
	}
	tdir, _ := TaskDir(a.dir, "job-1/0")
	if got, _ := readInt(filepath.Join(tdir, ExitCodeFile)); got != 3 {
		t.Fatalf("exit_code file holds %d, want 3", got)
	}
	if got, _ := readInt(filepath.Join(tdir, PgidFile)); got != st.Pgid {
		t.Fatalf("pgid file holds %d, want %d", got, st.Pgid)
	}
	out, err := a.c.Output(ctx, "job-1/0", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"out bar\n", "home=" + filepath.Join(tdir, WorkDir) + "\n", "err\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	rest, err := a.c.Output(ctx, "job-1/0", int64(len(out)))
	if err != nil || len(rest) != 0 {
		t.Fatalf("output past the end: %q, %v", rest, err)
	}
	info, err := a.c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Pid != a.sp.Cmd.Process.Pid || len(info.Tasks) != 1 || info.Tasks[0].Key != "job-1/0" {
		t.Fatalf("unexpected info %+v", info)
	}
	if _, err := a.c.Task(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown task: want ErrNotFound, got %v", err)
	}
	fi, err := os.Stat(filepath.Join(a.dir, SocketFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", fi.Mode(), err)
	}
}

func TestStartTaskIsIdempotent(t *testing.T) {
	a := startAgent(t, filepath.Join(shortTempDir(t), "n1"))
	ctx := ctxT(t)
	req := TaskRequest{Key: "t", Command: []string{"sh", "-c", "echo 1 >> count; exec sleep 300"}}
	first, err := a.c.StartTask(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	second, err := a.c.StartTask(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if first.Pid != second.Pid || !second.Running {
		t.Fatalf("second start made a new task: %+v then %+v", first, second)
	}
	tdir, _ := TaskDir(a.dir, "t")
	waitFileInt(t, filepath.Join(tdir, WorkDir, "count"))
	killed, err := a.c.Kill(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if killed.Running || killed.ExitCode != KilledExitCode {
		t.Fatalf("want killed task with 137, got %+v", killed)
	}
	// Starting an ended task's key again returns the ended task.
	again, err := a.c.StartTask(ctx, req)
	if err != nil || again.Running || again.ExitCode != KilledExitCode {
		t.Fatalf("restart of ended key: %+v, %v", again, err)
	}
	raw, _ := os.ReadFile(filepath.Join(tdir, WorkDir, "count"))
	if string(raw) != "1\n" {
		t.Fatalf("task ran %q, want once", raw)
	}
	// Killing an ended task is fine.
	if _, err := a.c.Kill(ctx, "t"); err != nil {
		t.Fatal(err)
	}
}

func TestKillKillsWholeProcessGroup(t *testing.T) {
	a := startAgent(t, filepath.Join(shortTempDir(t), "n1"))
	ctx := ctxT(t)
	st, err := a.c.StartTask(ctx, TaskRequest{Key: "t", Command: []string{"sh", "-c", "sleep 300 & echo $! > child.pid; wait"}})
	if err != nil {
		t.Fatal(err)
	}
	tdir, _ := TaskDir(a.dir, "t")
	child := waitFileInt(t, filepath.Join(tdir, WorkDir, "child.pid"))
	if !proc.Alive(child) {
		t.Fatal("child not running")
	}
	if _, err := a.c.Kill(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	waitExit(t, st.Pid)
	waitExit(t, child)
}

func TestLeaderExitTakesItsGroupDown(t *testing.T) {
	a := startAgent(t, filepath.Join(shortTempDir(t), "n1"))
	ctx := ctxT(t)
	if _, err := a.c.StartTask(ctx, TaskRequest{Key: "t", Command: []string{"sh", "-c", "sleep 300 & echo $! > child.pid"}}); err != nil {
		t.Fatal(err)
	}
	st, err := a.c.Wait(ctx, "t")
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("wait: %+v %v", st, err)
	}
	tdir, _ := TaskDir(a.dir, "t")
	waitExit(t, waitFileInt(t, filepath.Join(tdir, WorkDir, "child.pid")))
}

func TestCodeDirIsCopiedWithModes(t *testing.T) {
	root := shortTempDir(t)
	code := filepath.Join(root, "code")
	must(t, os.MkdirAll(filepath.Join(code, "pkg"), 0o750))
	must(t, os.WriteFile(filepath.Join(code, "run.sh"), []byte("#!/bin/sh\ncat pkg/data.txt\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(code, "pkg", "data.txt"), []byte("hello from code\n"), 0o640))
	must(t, os.Symlink("pkg/data.txt", filepath.Join(code, "link")))
	a := startAgent(t, filepath.Join(root, "n1"))
	ctx := ctxT(t)
	if _, err := a.c.StartTask(ctx, TaskRequest{Key: "t", Command: []string{"./run.sh"}, CodeDir: code}); err != nil {
		t.Fatal(err)
	}
	if st, err := a.c.Wait(ctx, "t"); err != nil || st.ExitCode != 0 {
		t.Fatalf("wait: %+v %v", st, err)
	}
	out, _ := a.c.Output(ctx, "t", 0)
	if string(out) != "hello from code\n" {
		t.Fatalf("output %q", out)
	}
	work := filepath.Join(a.dir, TasksDir, "t", WorkDir)
	for path, want := range map[string]os.FileMode{"run.sh": 0o755, "pkg/data.txt": 0o640, "pkg": 0o750} {
		fi, err := os.Stat(filepath.Join(work, path))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v (%v)", path, fi.Mode().Perm(), want, err)
		}
	}
	if link, err := os.Readlink(filepath.Join(work, "link")); err != nil || link != "pkg/data.txt" {
		t.Errorf("symlink: %q %v", link, err)
	}
}

func TestUnrunnableCommandsEndLikeAShellSays(t *testing.T) {
	a := startAgent(t, filepath.Join(shortTempDir(t), "n1"))
	ctx := ctxT(t)
	if _, err := a.c.StartTask(ctx, TaskRequest{Key: "t", Command: []string{"no-such-command-mlc"}}); err != nil {
		t.Fatal(err)
	}
	st, err := a.c.Wait(ctx, "t")
	if err != nil || st.ExitCode != 127 {
		t.Fatalf("want 127, got %+v %v", st, err)
	}
	out, _ := a.c.Output(ctx, "t", 0)
	if !strings.Contains(string(out), "no-such-command-mlc") {
		t.Fatalf("output %q does not say what failed", out)
	}
	_, err = a.c.StartTask(ctx, TaskRequest{Key: "..", Command: []string{"true"}})
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Code != "invalid" {
		t.Fatalf("key ..: want invalid, got %v", err)
	}
}

func TestSIGTERMKillsTasksAndRecordsThem(t *testing.T) {
	a := startAgent(t, filepath.Join(shortTempDir(t), "n1"))
	ctx := ctxT(t)
	st, err := a.c.StartTask(ctx, TaskRequest{Key: "t", Command: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	must(t, a.sp.Cmd.Process.Signal(unix.SIGTERM))
	select {
	case <-a.sp.Done:
		if err := a.sp.Err(); err != nil {
			t.Fatalf("agent exit: %v\n%s", err, readLog(a.dir))
		}
	case <-ctx.Done():
		t.Fatal("agent did not stop")
	}
	waitExit(t, st.Pid)
	tdir, _ := TaskDir(a.dir, "t")
	if code, err := readInt(filepath.Join(tdir, ExitCodeFile)); err != nil || code != KilledExitCode {
		t.Fatalf("exit_code %d %v, want 137", code, err)
	}
	if _, err := os.Stat(filepath.Join(a.dir, SocketFile)); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
}

func TestDeletingTheNodeDirStopsTheAgentAndItsTasks(t *testing.T) {
	a := startAgent(t, filepath.Join(shortTempDir(t), "n1"))
	ctx := ctxT(t)
	st, err := a.c.StartTask(ctx, TaskRequest{Key: "t", Command: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.RemoveAll(a.dir))
	select {
	case <-a.sp.Done:
	case <-ctx.Done():
		t.Fatal("agent kept running without its dir")
	}
	waitExit(t, st.Pid)
}

func TestRestartedAgentKillsOrphansAndRecords137(t *testing.T) {
	dir := filepath.Join(shortTempDir(t), "n1")
	a := startAgent(t, dir)
	ctx := ctxT(t)
	st, err := a.c.StartTask(ctx, TaskRequest{Key: "t", Command: []string{"sh", "-c", "sleep 300 & echo $! > child.pid; wait"}})
	if err != nil {
		t.Fatal(err)
	}
	tdir, _ := TaskDir(dir, "t")
	child := waitFileInt(t, filepath.Join(tdir, WorkDir, "child.pid"))
	must(t, a.sp.Cmd.Process.Signal(unix.SIGKILL))
	<-a.sp.Done
	if !proc.Alive(st.Pid) || !proc.Alive(child) {
		t.Fatal("the task should outlive a SIGKILLed agent until someone recovers it")
	}
	if _, err := os.Stat(filepath.Join(tdir, ExitCodeFile)); !os.IsNotExist(err) {
		t.Fatal("a SIGKILLed agent cannot have recorded an exit code")
	}

	b := startAgent(t, dir)
	waitExit(t, st.Pid)
	waitExit(t, child)
	got, err := b.c.Task(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if got.Running || got.ExitCode != KilledExitCode {
		t.Fatalf("want recovered task ended with 137, got %+v", got)
	}
	if code, _ := readInt(filepath.Join(tdir, ExitCodeFile)); code != KilledExitCode {
		t.Fatalf("exit_code %d, want 137", code)
	}
	// Waiting on an ended task answers at once.
	if w, err := b.c.Wait(ctx, "t"); err != nil || w.ExitCode != KilledExitCode {
		t.Fatalf("wait: %+v %v", w, err)
	}
}

func TestSecondAgentIsRefused(t *testing.T) {
	dir := filepath.Join(shortTempDir(t), "n1")
	startAgent(t, dir)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	done := make(chan error, 1)
	go func() { done <- run(context.Background(), dir, nil, clk) }()
	// The second agent retries the busy lock for lockWait; move its clock past that.
	for !clk.HasWaiters() {
		select {
		case err := <-done:
			t.Fatalf("second agent returned early: %v", err)
		default:
			time.Sleep(time.Millisecond)
		}
	}
	clk.Step(lockWait + time.Second)
	if err := <-done; !errors.Is(err, ErrAgentRunning) {
		t.Fatalf("want ErrAgentRunning, got %v", err)
	}
	if _, err := RecoverDir(context.Background(), dir, nil); !errors.Is(err, ErrAgentRunning) {
		t.Fatalf("RecoverDir under a live agent: want ErrAgentRunning, got %v", err)
	}
}

func TestLongNodeDirPathWorks(t *testing.T) {
	dir := shortTempDir(t)
	for len(dir) < 140 {
		dir = filepath.Join(dir, "a-rather-long-directory-name")
	}
	a := startAgent(t, dir)
	ctx := ctxT(t)
	if _, err := a.c.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.c.StartTask(ctx, TaskRequest{Key: "t", Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if st, err := a.c.Wait(ctx, "t"); err != nil || st.ExitCode != 0 {
		t.Fatalf("wait: %+v %v", st, err)
	}
}

func TestDirNameRoundTrip(t *testing.T) {
	for _, key := range []string{"job-1", "job/0", "a b%c", "ünï", "..x", "_.-"} {
		name, err := DirName(key)
		if err != nil {
			t.Fatalf("%q: %v", key, err)
		}
		if strings.ContainsRune(name, '/') {
			t.Fatalf("%q maps to %q", key, name)
		}
		back, err := KeyFromDirName(name)
		if err != nil || back != key {
			t.Fatalf("%q -> %q -> %q (%v)", key, name, back, err)
		}
	}
	for _, bad := range []string{"", ".", "..", strings.Repeat("x", 201)} {
		if _, err := DirName(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
