//go:build unix

package local

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent/proc"
)

// A node is a real process: the test binary re-executes itself as the node agent when
// its first argument is "node-agent" (the driver appends --dir), and as a task's process
// in a container when it is "container-run".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "node-agent" {
		fs := flag.NewFlagSet("node-agent", flag.ExitOnError)
		dir := fs.String("dir", "", "node dir")
		_ = fs.Parse(os.Args[2:])
		logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: os.Stderr})
		if err := nodeagent.Run(context.Background(), *dir, logger); err != nil {
			fmt.Fprintln(os.Stderr, "node agent:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if len(os.Args) > 1 && os.Args[1] == nodeagent.ContainerRunCommand {
		os.Exit(nodeagent.ContainerRunMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	// Agents are this binary built with -race too; do not let each one sleep a second
	// at exit.
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	os.Exit(m.Run())
}

// waitLimit bounds every wait on a real process; tests assert outcomes, never durations.
const waitLimit = 15 * time.Second

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newDriver returns a driver over a short temp dir (unix socket paths are limited to 108
// bytes) that terminates every node it finds there when the test ends.
func newDriver(t *testing.T, dir string) *Driver {
	t.Helper()
	return newDriverWithClock(t, dir, clock.RealClock{})
}

// newDriverWithClock is newDriver on the given clock.
func newDriverWithClock(t *testing.T, dir string, clk clock.WithTicker) *Driver {
	t.Helper()
	if dir == "" {
		root, err := os.MkdirTemp("", "mlc-")
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, "nodes")
		t.Cleanup(func() {
			cleanupNodes(t, dir)
			os.RemoveAll(root)
		})
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{
		Dir:       dir,
		AgentArgv: []string{exe, "node-agent"},
		Clock:     clk,
		Logger:    hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: logWriter{t}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// cleanupNodes terminates whatever a test left in dir, with a driver of its own.
func cleanupNodes(t *testing.T, dir string) {
	exe, _ := os.Executable()
	d, err := New(Config{Dir: dir, AgentArgv: []string{exe, "node-agent"}})
	if err != nil {
		return
	}
	defer d.Close()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		rec, err := readRecord(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if err := d.Terminate(context.Background(), rec.Key); err != nil {
			t.Errorf("cleanup: terminating %s: %v", rec.Key, err)
		}
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

func create(t *testing.T, d *Driver, key, owner string) driver.NodeInfo {
	t.Helper()
	info, err := d.Create(ctxT(t), driver.NodeSpec{Key: key, Owner: owner, VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14})
	if err != nil {
		t.Fatalf("create %s: %v", key, err)
	}
	return info
}

// nextEvent returns the next event, failing after waitLimit.
func nextEvent(t *testing.T, d *Driver) driver.Event {
	t.Helper()
	select {
	case ev := <-d.Events():
		return ev
	case <-time.After(waitLimit):
		t.Fatal("no event arrived")
		return driver.Event{}
	}
}

func noEventNow(t *testing.T, d *Driver) {
	t.Helper()
	select {
	case ev := <-d.Events():
		t.Fatalf("unexpected event %+v", ev)
	default:
	}
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

// waitFileInt polls for a number a task writes to a file (a real process; bounded).
func waitFileInt(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		if raw, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(raw), "\n") {
			if v, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
				return v
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
	return 0
}

func nodeDirOf(t *testing.T, d *Driver, key string) string {
	dir, err := d.nodeDir(key)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func taskFile(t *testing.T, d *Driver, node, task string, parts ...string) string {
	dir, err := nodeagent.TaskDir(nodeDirOf(t, d, node), task)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{dir}, parts...)...)
}

func agentPid(t *testing.T, d *Driver, key string) int {
	pid, err := nodeagent.ReadPid(nodeDirOf(t, d, key))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestCreateIsIdempotentUnderKey(t *testing.T) {
	d := newDriver(t, "")
	a := create(t, d, "ws-c-n1", "ws/c")
	pid := agentPid(t, d, "ws-c-n1")
	b := create(t, d, "ws-c-n1", "ws/c")
	if a != b {
		t.Fatalf("second create returned %+v, first %+v", b, a)
	}
	if agentPid(t, d, "ws-c-n1") != pid {
		t.Fatal("second create started another agent")
	}
	if a.Address != Address || a.Key != "ws-c-n1" || a.Owner != "ws/c" || a.StartedAt.IsZero() {
		t.Fatalf("unexpected info %+v", a)
	}
	rec, err := readRecord(nodeDirOf(t, d, "ws-c-n1"))
	if err != nil || rec.VMSize != "Standard_DS3_v2" || rec.VCPUs != 4 {
		t.Fatalf("node.json: %+v %v", rec, err)
	}
	got, err := d.Describe(ctxT(t), "ws-c-n1")
	if err != nil || got != a {
		t.Fatalf("describe: %+v %v", got, err)
	}
	if _, err := d.Describe(ctxT(t), "nope"); !driver.IsNotFound(err) {
		t.Fatalf("describe unknown: want ErrNotFound, got %v", err)
	}
}

func TestConcurrentCreatesStartOneAgent(t *testing.T) {
	d := newDriver(t, "")
	ctx := ctxT(t)
	infos := make(chan driver.NodeInfo, 4)
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() {
			info, err := d.Create(ctx, driver.NodeSpec{Key: "n1", Owner: "ws/c"})
			infos <- info
			errs <- err
		}()
	}
	first := <-infos
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			if got := <-infos; got != first {
				t.Fatalf("creates disagree: %+v vs %+v", got, first)
			}
		}
	}
	nodes, err := d.List(ctx, "")
	if err != nil || len(nodes) != 1 {
		t.Fatalf("list: %+v %v", nodes, err)
	}
}

func TestTaskOutputAndExitCodeArriveAsEvent(t *testing.T) {
	d := newDriver(t, "")
	create(t, d, "n1", "ws/c")
	ctx := ctxT(t)
	err := d.StartTask(ctx, "n1", driver.TaskSpec{Key: "job-1/0", Command: []string{"sh", "-c", `echo "hello $RANK"`}, Env: map[string]string{"RANK": "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, d); ev != (driver.Event{Kind: driver.TaskExited, NodeKey: "n1", TaskKey: "job-1/0", ExitCode: 0}) {
		t.Fatalf("event %+v", ev)
	}
	out, err := d.TaskOutput(ctx, "n1", "job-1/0", 0)
	if err != nil || string(out) != "hello 0\n" {
		t.Fatalf("output %q %v", out, err)
	}
	if out, err := d.TaskOutput(ctx, "n1", "job-1/0", 6); err != nil || string(out) != "0\n" {
		t.Fatalf("output from offset %q %v", out, err)
	}

	if err := d.StartTask(ctx, "n1", driver.TaskSpec{Key: "job-2/0", Command: []string{"sh", "-c", "exit 42"}}); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, d); ev.TaskKey != "job-2/0" || ev.ExitCode != 42 {
		t.Fatalf("event %+v", ev)
	}
	st, err := d.TaskStatus(ctx, "n1", "job-2/0")
	if err != nil || st.Running || st.ExitCode != 42 {
		t.Fatalf("status %+v %v", st, err)
	}
	if code, err := os.ReadFile(taskFile(t, d, "n1", "job-2/0", nodeagent.ExitCodeFile)); err != nil || string(code) != "42\n" {
		t.Fatalf("exit_code on disk %q %v", code, err)
	}
	if _, err := d.TaskStatus(ctx, "n1", "nope"); !driver.IsNotFound(err) {
		t.Fatalf("unknown task: %v", err)
	}
	if _, err := d.TaskOutput(ctx, "n1", "nope", 0); !driver.IsNotFound(err) {
		t.Fatalf("unknown task output: %v", err)
	}
	if err := d.StartTask(ctx, "nope", driver.TaskSpec{Key: "t", Command: []string{"true"}}); !driver.IsNotFound(err) {
		t.Fatalf("unknown node: %v", err)
	}
}

func TestCodeDirIsCopiedIntoWorkDir(t *testing.T) {
	d := newDriver(t, "")
	create(t, d, "n1", "ws/c")
	code := t.TempDir()
	if err := os.WriteFile(filepath.Join(code, "train.sh"), []byte("#!/bin/sh\necho trained in $(basename $PWD)\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := d.StartTask(ctx, "n1", driver.TaskSpec{Key: "t", Command: []string{"./train.sh"}, CodeDir: code}); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, d); ev.ExitCode != 0 {
		t.Fatalf("event %+v", ev)
	}
	out, _ := d.TaskOutput(ctx, "n1", "t", 0)
	if string(out) != "trained in work\n" {
		t.Fatalf("output %q", out)
	}
	fi, err := os.Stat(taskFile(t, d, "n1", "t", nodeagent.WorkDir, "train.sh"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("copied script: %v %v", fi, err)
	}
}

func TestKillTaskKillsWholeProcessGroup(t *testing.T) {
	d := newDriver(t, "")
	create(t, d, "n1", "ws/c")
	ctx := ctxT(t)
	if err := d.StartTask(ctx, "n1", driver.TaskSpec{Key: "t", Command: []string{"sh", "-c", "sleep 300 & echo $! > child.pid; wait"}}); err != nil {
		t.Fatal(err)
	}
	child := waitFileInt(t, taskFile(t, d, "n1", "t", nodeagent.WorkDir, "child.pid"))
	leader := waitFileInt(t, taskFile(t, d, "n1", "t", nodeagent.PgidFile))
	if err := d.KillTask(ctx, "n1", "t"); err != nil {
		t.Fatal(err)
	}
	waitExit(t, leader)
	waitExit(t, child)
	if ev := nextEvent(t, d); ev.TaskKey != "t" || ev.ExitCode != nodeagent.KilledExitCode {
		t.Fatalf("event %+v", ev)
	}
	if err := d.KillTask(ctx, "n1", "t"); err != nil {
		t.Fatalf("killing an ended task: %v", err)
	}
}

func TestAgentSIGKILLIsNodeGoneAndLeavesNothingRunning(t *testing.T) {
	d := newDriver(t, "")
	create(t, d, "n1", "ws/c")
	ctx := ctxT(t)
	if err := d.StartTask(ctx, "n1", driver.TaskSpec{Key: "t", Command: []string{"sh", "-c", "echo up; sleep 300 & echo $! > child.pid; wait"}}); err != nil {
		t.Fatal(err)
	}
	child := waitFileInt(t, taskFile(t, d, "n1", "t", nodeagent.WorkDir, "child.pid"))
	leader := waitFileInt(t, taskFile(t, d, "n1", "t", nodeagent.PgidFile))
	if err := unix.Kill(agentPid(t, d, "n1"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, d); ev != (driver.Event{Kind: driver.NodeGone, NodeKey: "n1"}) {
		t.Fatalf("event %+v", ev)
	}
	// By the time NodeGone arrives, the tasks went with the node.
	if proc.Alive(leader) || proc.Alive(child) {
		t.Fatal("task processes outlived their node")
	}
	if code, _ := os.ReadFile(taskFile(t, d, "n1", "t", nodeagent.ExitCodeFile)); string(code) != "137\n" {
		t.Fatalf("exit_code %q, want 137", code)
	}
	if _, err := d.Describe(ctx, "n1"); !driver.IsNotFound(err) {
		t.Fatalf("describe dead node: %v", err)
	}
	if nodes, _ := d.List(ctx, ""); len(nodes) != 0 {
		t.Fatalf("list shows dead node: %+v", nodes)
	}
	if _, err := d.TaskStatus(ctx, "n1", "t"); !driver.IsNotFound(err) {
		t.Fatalf("status on dead node: %v", err)
	}
	if out, err := d.TaskOutput(ctx, "n1", "t", 0); err != nil || string(out) != "up\n" {
		t.Fatalf("output of a dead node's task: %q %v", out, err)
	}

	// Creating the key again brings the node back; the old task stays ended with 137.
	create(t, d, "n1", "ws/c")
	st, err := d.TaskStatus(ctx, "n1", "t")
	if err != nil || st.Running || st.ExitCode != nodeagent.KilledExitCode {
		t.Fatalf("old task after re-create: %+v %v", st, err)
	}
}

func TestRestartedAgentRecordsOrphanAndKillsItsGroup(t *testing.T) {
	d := newDriver(t, "")
	create(t, d, "n1", "ws/c")
	ctx := ctxT(t)
	if err := d.StartTask(ctx, "n1", driver.TaskSpec{Key: "t", Command: []string{"sh", "-c", "sleep 300 & echo $! > child.pid; wait"}}); err != nil {
		t.Fatal(err)
	}
	child := waitFileInt(t, taskFile(t, d, "n1", "t", nodeagent.WorkDir, "child.pid"))
	leader := waitFileInt(t, taskFile(t, d, "n1", "t", nodeagent.PgidFile))
	// Nobody watches: the engine is down when the agent dies.
	d.Close()
	if err := unix.Kill(agentPid(t, d, "n1"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExit(t, agentPidUnchecked(d, "n1"))
	if !proc.Alive(leader) || !proc.Alive(child) {
		t.Fatal("without a watcher the orphaned task should still run")
	}
	d2 := newDriver(t, d.dir)
	if _, err := d2.Describe(ctx, "n1"); !driver.IsNotFound(err) {
		t.Fatalf("describe: %v", err)
	}
	create(t, d2, "n1", "ws/c") // a new agent in the same dir recovers the orphan
	waitExit(t, leader)
	waitExit(t, child)
	st, err := d2.TaskStatus(ctx, "n1", "t")
	if err != nil || st.Running || st.ExitCode != nodeagent.KilledExitCode {
		t.Fatalf("status %+v %v", st, err)
	}
}

func agentPidUnchecked(d *Driver, key string) int {
	dir, _ := d.nodeDir(key)
	pid, _ := nodeagent.ReadPid(dir)
	return pid
}

func TestTerminateLeavesNoProcessAndIsIdempotent(t *testing.T) {
	d := newDriver(t, "")
	create(t, d, "n1", "ws/c")
	ctx := ctxT(t)
	if err := d.StartTask(ctx, "n1", driver.TaskSpec{Key: "t", Command: []string{"sh", "-c", "sleep 300 & echo $! > child.pid; wait"}}); err != nil {
		t.Fatal(err)
	}
	pids := []int{
		agentPid(t, d, "n1"),
		waitFileInt(t, taskFile(t, d, "n1", "t", nodeagent.PgidFile)),
		waitFileInt(t, taskFile(t, d, "n1", "t", nodeagent.WorkDir, "child.pid")),
	}
	dir := nodeDirOf(t, d, "n1")
	if err := d.Terminate(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if proc.Alive(pid) {
			t.Errorf("pid %d is still running after Terminate", pid)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("node dir left: %v", err)
	}
	noEventNow(t, d) // the engine asked for it: no NodeGone
	if err := d.Terminate(ctx, "n1"); err != nil {
		t.Fatalf("second terminate: %v", err)
	}
	if _, err := d.Describe(ctx, "n1"); !driver.IsNotFound(err) {
		t.Fatalf("describe after terminate: %v", err)
	}
}

func TestTerminateCleansUpAfterADeadAgent(t *testing.T) {
	d := newDriver(t, "")
	create(t, d, "n1", "ws/c")
	ctx := ctxT(t)
	if err := d.StartTask(ctx, "n1", driver.TaskSpec{Key: "t", Command: []string{"sleep", "300"}}); err != nil {
		t.Fatal(err)
	}
	leader := waitFileInt(t, taskFile(t, d, "n1", "t", nodeagent.PgidFile))
	d.Close()
	agent := agentPid(t, d, "n1")
	if err := unix.Kill(agent, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExit(t, agent)
	d2 := newDriver(t, d.dir)
	if err := d2.Terminate(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if proc.Alive(leader) {
		t.Fatal("orphaned task survived Terminate")
	}
	if _, err := os.Stat(nodeDirOf(t, d2, "n1")); !os.IsNotExist(err) {
		t.Fatalf("node dir left: %v", err)
	}
}

func TestAdoptionAfterEngineRestart(t *testing.T) {
	d1 := newDriver(t, "")
	info := create(t, d1, "n1", "ws/c")
	ctx := ctxT(t)
	fifo := filepath.Join(t.TempDir(), "go")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d1.StartTask(ctx, "n1", driver.TaskSpec{Key: "t", Command: []string{"sh", "-c", "read line < " + fifo + "; exit 7"}}); err != nil {
		t.Fatal(err)
	}
	if err := d1.Close(); err != nil {
		t.Fatal(err)
	}

	d2 := newDriver(t, d1.dir) // the engine restarted
	got, err := d2.Describe(ctx, "n1")
	if err != nil || got != info {
		t.Fatalf("describe after restart: %+v %v", got, err)
	}
	st, err := d2.TaskStatus(ctx, "n1", "t")
	if err != nil || !st.Running {
		t.Fatalf("task should still run: %+v %v", st, err)
	}
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(w, "go")
	w.Close()
	if ev := nextEvent(t, d2); ev != (driver.Event{Kind: driver.TaskExited, NodeKey: "n1", TaskKey: "t", ExitCode: 7}) {
		t.Fatalf("event %+v", ev)
	}
	noEventNow(t, d1)
}

func TestStartTaskAgainReportsATaskThatEndedUnwatched(t *testing.T) {
	d1 := newDriver(t, "")
	create(t, d1, "n1", "ws/c")
	ctx := ctxT(t)
	fifo := filepath.Join(t.TempDir(), "go")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	spec := driver.TaskSpec{Key: "t", Command: []string{"sh", "-c", "read line < " + fifo + "; exit 5"}}
	if err := d1.StartTask(ctx, "n1", spec); err != nil {
		t.Fatal(err)
	}
	leader := waitFileInt(t, taskFile(t, d1, "n1", "t", nodeagent.PgidFile))
	d1.Close()
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(w, "go")
	w.Close()
	waitExit(t, leader) // it ended while no engine watched

	d2 := newDriver(t, d1.dir)
	if _, err := d2.Describe(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := d2.StartTask(ctx, "n1", spec); err != nil { // idempotent: re-arms the watch
		t.Fatal(err)
	}
	if ev := nextEvent(t, d2); ev.TaskKey != "t" || ev.ExitCode != 5 {
		t.Fatalf("event %+v", ev)
	}
	if st, err := d2.TaskStatus(ctx, "n1", "t"); err != nil || st.Running || st.ExitCode != 5 {
		t.Fatalf("status %+v %v", st, err)
	}
}

func TestListByOwner(t *testing.T) {
	d := newDriver(t, "")
	create(t, d, "n2", "ws/a")
	create(t, d, "n1", "ws/a")
	create(t, d, "n3", "ws/b")
	ctx := ctxT(t)
	keys := func(owner string) string {
		nodes, err := d.List(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, n := range nodes {
			ks = append(ks, n.Key)
		}
		return strings.Join(ks, ",")
	}
	if got := keys("ws/a"); got != "n1,n2" {
		t.Fatalf("owner ws/a: %s", got)
	}
	if got := keys(""); got != "n1,n2,n3" {
		t.Fatalf("all: %s", got)
	}
	if err := unix.Kill(agentPid(t, d, "n2"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, d); ev.Kind != driver.NodeGone || ev.NodeKey != "n2" {
		t.Fatalf("event %+v", ev)
	}
	if got := keys("ws/a"); got != "n1" {
		t.Fatalf("owner ws/a after n2 died: %s", got)
	}
}

func TestConfigIsChecked(t *testing.T) {
	if _, err := New(Config{AgentArgv: []string{"x"}}); err == nil {
		t.Fatal("want an error without Dir")
	}
	if _, err := New(Config{Dir: t.TempDir()}); err == nil {
		t.Fatal("want an error without AgentArgv")
	}
	d := newDriver(t, "")
	if d.Name() != "local" {
		t.Fatalf("name %q", d.Name())
	}
	if _, err := d.Create(ctxT(t), driver.NodeSpec{Key: ".."}); err == nil {
		t.Fatal("want an error for key ..")
	}
}

func TestCreateClassifiesSpawnFailures(t *testing.T) {
	root, err := os.MkdirTemp("", "mlc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	notExecutable := filepath.Join(root, "agent")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, argv := range map[string][]string{
		"NotExecutable": {notExecutable},
		"Missing":       {filepath.Join(root, "no-such-agent")},
	} {
		t.Run(name, func(t *testing.T) {
			d, err := New(Config{Dir: filepath.Join(root, name), AgentArgv: argv})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			_, err = d.Create(ctxT(t), driver.NodeSpec{Key: "n1"})
			if !driver.IsPermanent(err) {
				t.Fatalf("create with agent %s: %v, want a permanent error", argv[0], err)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	wrap := func(errno syscall.Errno) error { return &os.PathError{Op: "open", Path: "x", Err: errno} }
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.ENOMEM, syscall.EAGAIN} {
		if err := classify(wrap(errno)); !driver.IsNoCapacity(err) || driver.IsPermanent(err) {
			t.Errorf("%v: %v is not no-capacity only", errno, err)
		}
	}
	for _, errno := range []syscall.Errno{syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ENOENT} {
		if err := classify(wrap(errno)); !driver.IsPermanent(err) || driver.IsNoCapacity(err) {
			t.Errorf("%v: %v is not permanent only", errno, err)
		}
	}
	if err := classify(errors.New("x")); driver.IsPermanent(err) || driver.IsNoCapacity(err) || driver.IsTransient(err) {
		t.Errorf("an unknown error was classified: %v", err)
	}
}

// A nodes directory or node directory that already existed with a looser mode (made by
// hand, or left by an older version) is made 0700: nodes hold jobs' code and output.
func TestExistingNodeDirsAreMadePrivate(t *testing.T) {
	root, err := os.MkdirTemp("", "mlc-")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "nodes")
	t.Cleanup(func() {
		cleanupNodes(t, dir)
		os.RemoveAll(root)
	})
	name, err := nodeagent.DirName("open-node")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, name)} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d := newDriver(t, dir)
	if _, err := d.Create(ctxT(t), driver.NodeSpec{Key: "open-node", Owner: "ws/c", VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, name)} {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if perm := info.Mode().Perm(); perm != 0o700 {
			t.Errorf("%s has mode %04o; want 0700", filepath.Base(p), perm)
		}
	}
}
