//go:build unix

package ssh

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/remotetask"
)

// targets is the store a Driver's Lookup reads in these tests.
type targets struct {
	mu sync.Mutex
	m  map[string]Target
}

func (ts *targets) lookup(_ context.Context, key string) (Target, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.m[key]
	if !ok {
		return Target{}, driver.ErrNotFound
	}
	return t, nil
}

func newTestDriver(t *testing.T, ts *targets) *Driver {
	d := NewDriver(DriverConfig{Lookup: ts.lookup, KeepAlive: 500 * time.Millisecond})
	t.Cleanup(func() { d.Close() })
	return d
}

// nextExit waits for the TaskExited of task.
func nextExit(t *testing.T, d *Driver, task string) driver.Event {
	t.Helper()
	timeout := time.After(waitLimit)
	for {
		select {
		case ev := <-d.Events():
			if ev.Kind == driver.TaskExited && ev.TaskKey == task {
				return ev
			}
		case <-timeout:
			t.Fatalf("no exit of task %s within %s", task, waitLimit)
		}
	}
}

func TestDriver(t *testing.T) {
	s := startSSHD(t)
	ts := &targets{m: map[string]Target{"vm-a": s.target()}}

	t.Run("CodeCopiedAndExitDelivered", func(t *testing.T) {
		d := newTestDriver(t, ts)
		info, err := d.Create(testCtx(t), driver.NodeSpec{Key: "vm-a", Owner: "ws/vm"})
		must(t, err)
		if info.Address != s.Address {
			t.Fatalf("address %q, want %q", info.Address, s.Address)
		}
		code := t.TempDir()
		must(t, os.MkdirAll(filepath.Join(code, "pkg"), 0o755))
		must(t, os.WriteFile(filepath.Join(code, "pkg", "train.sh"), []byte("echo trained on $RANK; exit 4\n"), 0o644))
		spec := driver.TaskSpec{Key: "job-1.0-0", Command: []string{"sh", "pkg/train.sh"}, Env: map[string]string{"RANK": "0"}, CodeDir: code}
		must(t, d.StartTask(testCtx(t), "vm-a", spec))
		must(t, d.StartTask(testCtx(t), "vm-a", spec)) // idempotent
		if ev := nextExit(t, d, spec.Key); ev.NodeKey != "vm-a" || ev.ExitCode != 4 {
			t.Fatalf("event %+v, want vm-a exit 4", ev)
		}
		out, err := d.TaskOutput(testCtx(t), "vm-a", spec.Key, 0)
		must(t, err)
		if string(out) != "trained on 0\n" {
			t.Fatalf("output %q: the task ran more than once or without its code", out)
		}
		if _, err := d.TaskStatus(testCtx(t), "vm-b", spec.Key); !driver.IsNotFound(err) {
			t.Fatalf("unknown node: %v, want not found", err)
		}
	})

	t.Run("DroppedConnectionMidTask", func(t *testing.T) {
		d := newTestDriver(t, ts)
		gate := filepath.Join(s.Home, "drop-go")
		spec := driver.TaskSpec{Key: "job-2.0-0", Command: []string{"sh", "-c",
			`echo before; while [ ! -f "$1" ]; do sleep 0.05; done; echo after; exit 6`, "sh", gate}}
		must(t, d.StartTask(testCtx(t), "vm-a", spec))
		// The watcher's remote wait is on the connection now; cut every connection.
		deadline := time.Now().Add(waitLimit)
		for s.DropConnections(t) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("no SSH connection to drop")
			}
			time.Sleep(20 * time.Millisecond)
		}
		must(t, os.WriteFile(gate, nil, 0o644))
		if ev := nextExit(t, d, spec.Key); ev.ExitCode != 6 {
			t.Fatalf("event %+v, want exit 6", ev)
		}
		out, err := d.TaskOutput(testCtx(t), "vm-a", spec.Key, 0)
		must(t, err)
		if string(out) != "before\nafter\n" {
			t.Fatalf("output %q", out)
		}
	})

	t.Run("NetworkDownWhileTaskEnds", func(t *testing.T) {
		if s.Namespace == "" {
			t.Skip("the host runs on loopback (no network namespaces): it has no link to take down")
		}
		d := newTestDriver(t, ts)
		gate := filepath.Join(s.Home, "down-go")
		spec := driver.TaskSpec{Key: "job-5.0-0", Command: []string{"sh", "-c", `while [ ! -f "$1" ]; do sleep 0.05; done; echo done; exit 5`, "sh", gate}}
		must(t, d.StartTask(testCtx(t), "vm-a", spec))
		s.SetLinkUp(t, false)
		t.Cleanup(func() { s.SetLinkUp(t, true) })
		// Nothing resets a connection over a link that is down: the keep-alive notices.
		deadline := time.Now().Add(waitLimit)
		for {
			d.mu.Lock()
			n := len(d.conns)
			d.mu.Unlock()
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the connection over the downed link was never closed")
			}
			time.Sleep(50 * time.Millisecond)
		}
		must(t, os.WriteFile(gate, nil, 0o644)) // the task ends while the machine is cut off
		s.SetLinkUp(t, true)
		if ev := nextExit(t, d, spec.Key); ev.ExitCode != 5 {
			t.Fatalf("event %+v, want exit 5", ev)
		}
	})

	t.Run("FailedCallKeepsTheConnection", func(t *testing.T) {
		d := newTestDriver(t, ts)
		gate := filepath.Join(s.Home, "keep-go")
		spec := driver.TaskSpec{Key: "job-11.0-0", Command: []string{"sh", "-c", `while [ ! -f "$1" ]; do sleep 0.05; done; exit 3`, "sh", gate}}
		must(t, d.StartTask(testCtx(t), "vm-a", spec))
		conn := func() *Client {
			d.mu.Lock()
			defer d.mu.Unlock()
			return d.conns["vm-a"]
		}
		before := conn()

		// A local failure: the code to copy is missing.
		missing := driver.TaskSpec{Key: "job-11.1-0", Command: []string{"true"}, CodeDir: filepath.Join(t.TempDir(), "missing")}
		if err := d.StartTask(testCtx(t), "vm-a", missing); err == nil {
			t.Fatal("a task whose code is missing started")
		}
		// A remote answer that makes no sense: an ended task's exit status is garbled.
		ended := driver.TaskSpec{Key: "job-11.2-0", Command: []string{"true"}}
		must(t, d.StartTask(testCtx(t), "vm-a", ended))
		nextExit(t, d, ended.Key)
		must(t, os.WriteFile(filepath.Join(s.Home, ".mlcompute/tasks/vm-a.job-11.2-0/exit_code"), []byte("garbled\n"), 0o600))
		if _, err := d.TaskStatus(testCtx(t), "vm-a", ended.Key); err == nil || !strings.Contains(err.Error(), "garbled") {
			t.Fatalf("status of a garbled task: %v, want an error quoting it", err)
		}
		if conn() != before {
			t.Fatal("a failed call replaced the connection, cutting the sessions on it")
		}
		must(t, os.WriteFile(gate, nil, 0o644))
		if ev := nextExit(t, d, spec.Key); ev.ExitCode != 3 {
			t.Fatalf("event %+v, want exit 3", ev)
		}
	})

	t.Run("RestartedDriverAdoptsRunningTask", func(t *testing.T) {
		first := NewDriver(DriverConfig{Lookup: ts.lookup})
		gate := filepath.Join(s.Home, "adopt-go")
		spec := driver.TaskSpec{Key: "job-3.0-0", Command: []string{"sh", "-c", `while [ ! -f "$1" ]; do sleep 0.05; done; exit 9`, "sh", gate}}
		must(t, first.StartTask(testCtx(t), "vm-a", spec))
		must(t, first.Close()) // the engine stops; the task runs on

		second := newTestDriver(t, ts)
		if _, err := second.Describe(testCtx(t), "vm-a"); err != nil {
			t.Fatal(err)
		}
		if st, err := second.TaskStatus(testCtx(t), "vm-a", spec.Key); err != nil || !st.Running {
			t.Fatalf("status %+v, %v; want running", st, err)
		}
		must(t, os.WriteFile(gate, nil, 0o644))
		if ev := nextExit(t, second, spec.Key); ev.ExitCode != 9 {
			t.Fatalf("event %+v, want exit 9", ev)
		}
	})

	t.Run("RestartedDriverReportsRecordedTaskThatEnded", func(t *testing.T) {
		first := NewDriver(DriverConfig{Lookup: ts.lookup})
		spec := driver.TaskSpec{Key: "job-6.0-0", Command: []string{"sh", "-c", "exit 8"}}
		must(t, first.StartTask(testCtx(t), "vm-a", spec))
		must(t, first.Close()) // the engine stops before the task ends
		exitFile := filepath.Join(s.Home, ".mlcompute/tasks/vm-a.job-6.0-0/exit_code")
		for deadline := time.Now().Add(waitLimit); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(exitFile); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the task never recorded its exit")
			}
		}

		recorded := func(_ context.Context, key string) ([]string, error) {
			if _, err := ts.lookup(context.Background(), key); err != nil {
				return nil, err
			}
			return []string{spec.Key}, nil
		}
		second := NewDriver(DriverConfig{Lookup: ts.lookup, Tasks: recorded, KeepAlive: 500 * time.Millisecond})
		t.Cleanup(func() { second.Close() })
		if _, err := second.Describe(testCtx(t), "vm-a"); err != nil {
			t.Fatal(err)
		}
		if ev := nextExit(t, second, spec.Key); ev.NodeKey != "vm-a" || ev.ExitCode != 8 {
			t.Fatalf("event %+v, want vm-a exit 8", ev)
		}
	})

	t.Run("NoRemoteWaitOutlivesItsSession", func(t *testing.T) {
		d := NewDriver(DriverConfig{Lookup: ts.lookup})
		spec := driver.TaskSpec{Key: "job-10.0-0", Command: []string{"sleep", "300"}}
		must(t, d.StartTask(testCtx(t), "vm-a", spec))
		rkey := driver.MachineTaskKey("vm-a", spec.Key)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			_ = Kill(ctx, s.target(), rkey)
		})
		// Each drop ends the watcher's session; it reconnects and waits in a new one.
		for range 3 {
			var before []int
			waitUntil(t, "a remote wait", func() bool { before = remoteWaits(s.UID, rkey); return len(before) > 0 })
			waitUntil(t, "a connection to drop", func() bool { return s.DropConnections(t) > 0 })
			waitUntil(t, "a remote wait in a new session", func() bool {
				for _, pid := range remoteWaits(s.UID, rkey) {
					if !slices.Contains(before, pid) {
						return true
					}
				}
				return false
			})
		}
		waitUntil(t, "one remote wait left after the drops", func() bool { return len(remoteWaits(s.UID, rkey)) == 1 })
		must(t, d.Close()) // the engine stops; the task runs on
		waitUntil(t, "no remote wait left after the engine stopped", func() bool { return len(remoteWaits(s.UID, rkey)) == 0 })
	})

	t.Run("TerminateKillsTasksAndLeavesMachine", func(t *testing.T) {
		d := newTestDriver(t, ts)
		spec := driver.TaskSpec{Key: "job-4.0-0", Command: []string{"sleep", "300"}}
		must(t, d.StartTask(testCtx(t), "vm-a", spec))
		must(t, d.Terminate(testCtx(t), "vm-a"))
		if ev := nextExit(t, d, spec.Key); ev.ExitCode != 128+int(syscall.SIGTERM) {
			t.Fatalf("event %+v, want killed by SIGTERM", ev)
		}
		if _, err := os.Stat(filepath.Join(s.Home, ".mlcompute/tasks/vm-a.job-4.0-0/output.log")); err != nil {
			t.Fatalf("the task's files were removed from the machine: %v", err)
		}
	})

	t.Run("TerminateLeavesNoConnectionOrWatcher", func(t *testing.T) {
		d := newTestDriver(t, ts)
		spec := driver.TaskSpec{Key: "job-7.0-0", Command: []string{"sleep", "300"}}
		must(t, d.StartTask(testCtx(t), "vm-a", spec))
		watched := watchedTasks(t, d, "vm-a")
		must(t, d.Terminate(testCtx(t), "vm-a"))
		nextExit(t, d, spec.Key)
		// The engine deletes the node's record only after Terminate returned: until then
		// calls still find the node, and must not connect again.
		if _, err := d.TaskOutput(testCtx(t), "vm-a", spec.Key, 0); !driver.IsNotFound(err) {
			t.Fatalf("output of a detached node: %v, want not found", err)
		}
		waitDetached(t, d, "vm-a", watched)
		if _, err := d.Create(testCtx(t), driver.NodeSpec{Key: "vm-a"}); err != nil {
			t.Fatalf("attaching again after a detach: %v", err)
		}

		// A node whose record is gone before Terminate runs is let go as well.
		gone := &targets{m: map[string]Target{"vm-d": s.target()}}
		d2 := newTestDriver(t, gone)
		spec2 := driver.TaskSpec{Key: "job-7.1-0", Command: []string{"sleep", "300"}}
		must(t, d2.StartTask(testCtx(t), "vm-d", spec2))
		watched2 := watchedTasks(t, d2, "vm-d")
		gone.mu.Lock()
		delete(gone.m, "vm-d")
		gone.mu.Unlock()
		must(t, d2.Terminate(testCtx(t), "vm-d"))
		waitDetached(t, d2, "vm-d", watched2)
	})

	t.Run("TerminateKillsStubbornTasksTogether", func(t *testing.T) {
		// Tasks that ignore SIGTERM each hold out for the whole grace period: one after
		// another, four would outlast Terminate's deadline.
		d := NewDriver(DriverConfig{Lookup: ts.lookup, DialTimeout: 2 * time.Second})
		t.Cleanup(func() { d.Close() })
		var specs []driver.TaskSpec
		for i := range 4 {
			spec := driver.TaskSpec{Key: "job-12.0-" + strconv.Itoa(i), Command: []string{"sh", "-c", `trap "" TERM; sleep 300`}}
			must(t, d.StartTask(testCtx(t), "vm-a", spec))
			specs = append(specs, spec)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*waitLimit) // the grace period and more
		defer cancel()
		must(t, d.Terminate(ctx, "vm-a"))
		exits := map[string]int{}
		for range specs {
			select {
			case ev := <-d.Events():
				exits[ev.TaskKey] = ev.ExitCode
			case <-time.After(waitLimit):
				t.Fatalf("exits %v: not every task was killed", exits)
			}
		}
		for _, spec := range specs {
			if code, ok := exits[spec.Key]; !ok || code != 128+int(syscall.SIGKILL) {
				t.Fatalf("exits %v: want each task killed by SIGKILL", exits)
			}
		}
	})

	t.Run("TerminateUnreachableMachine", func(t *testing.T) {
		tg := s.target()
		tg.Port = s.ClosedPort(t)
		d := newTestDriver(t, &targets{m: map[string]Target{"vm-c": tg}})
		if err := d.Terminate(testCtx(t), "vm-c"); err != nil {
			t.Fatalf("detaching an unreachable machine failed: %v", err)
		}
		if _, err := d.Create(testCtx(t), driver.NodeSpec{Key: "vm-c"}); !IsConnectionRefused(err) {
			t.Fatalf("create on a closed port: %v, want connection refused", err)
		}
		if err := d.Terminate(testCtx(t), "vm-unknown"); err != nil {
			t.Fatalf("terminating an unknown node: %v", err)
		}
	})
}

// watchedTasks returns the watched tasks of a node d watches.
func watchedTasks(t *testing.T, d *Driver, key string) *remotetask.Tasks {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.nodes[key]
	if n == nil {
		t.Fatalf("node %s has no watched tasks", key)
	}
	return n.tasks
}

// waitDetached waits until d holds no connection, no longer watches node key, and every
// watch of watched (the node's tasks before the detach) ended.
func waitDetached(t *testing.T, d *Driver, key string, watched *remotetask.Tasks) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := watched.Await(ctx); err != nil {
		t.Fatalf("a watch of node %s still runs after detaching: %v", key, err)
	}
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(20 * time.Millisecond) {
		d.mu.Lock()
		conns, n := len(d.conns), d.nodes[key]
		d.mu.Unlock()
		if conns == 0 && n == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connection(s) left and node watched %v after detaching", conns, n != nil)
		}
	}
}

// waitUntil waits for cond, failing the test when it does not hold within waitLimit.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(waitLimit); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never reached: %s", what)
		}
	}
}

// remoteWaits returns the pids of uid's processes running a remote script for task key
// ("sh -s -- <key>"); while the task runs, those are its remote waits.
func remoteWaits(uid int, key string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		var st syscall.Stat_t
		if syscall.Stat(dir, &st) != nil || int(st.Uid) != uid {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil || string(raw) != "sh\x00-s\x00--\x00"+key+"\x00" {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(dir)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
