//go:build unix

package local

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// nextWake waits for a receive on an output watch; it fails the test after waitLimit, so
// a watch that never fires (a follower that would have to poll) cannot pass.
func nextWake(t *testing.T, ch <-chan struct{}) bool {
	t.Helper()
	select {
	case _, open := <-ch:
		return open
	case <-time.After(waitLimit):
		t.Fatal("the output watch did not fire")
		return false
	}
}

// A watch armed on a running task fires on each of its writes and on its end, so a
// reader that reads after each wake sees everything the task prints, in order; the
// watch is closed once the node (and so the task's directory) is gone.
func TestWatchOutputWakesOnEachWriteAndEndsWithTheNode(t *testing.T) {
	d := newDriver(t, "")
	create(t, d, "n1", "ws/c")
	// The task prints once, then waits on a FIFO the test writes to: its second line
	// comes only after the test has seen the first through the watch.
	fifo := filepath.Join(t.TempDir(), "trigger")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.StartTask(ctxT(t), "n1", driver.TaskSpec{
		Key:     "t1",
		Command: []string{"sh", "-c", `echo first; read line < "$TRIGGER"; echo "$line"`},
		Env:     map[string]string{"TRIGGER": fifo},
	}); err != nil {
		t.Fatal(err)
	}
	ch, err := d.WatchOutput(ctxT(t), "n1", "t1")
	if err != nil {
		t.Fatal(err)
	}
	triggered := false
	for {
		out, err := d.TaskOutput(ctxT(t), "n1", "t1", 0)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "second") {
			if string(out) != "first\nsecond\n" {
				t.Fatalf("output = %q", out)
			}
			break
		}
		if !triggered && strings.Contains(string(out), "first") {
			if err := os.WriteFile(fifo, []byte("second\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			triggered = true
		}
		if !nextWake(t, ch) {
			t.Fatal("the watch closed while the task ran")
		}
	}
	if ev := nextEvent(t, d); ev.Kind != driver.TaskExited || ev.TaskKey != "t1" || ev.ExitCode != 0 {
		t.Fatalf("event = %+v", ev)
	}
	if err := d.Terminate(ctxT(t), "n1"); err != nil {
		t.Fatal(err)
	}
	for nextWake(t, ch) {
		// wakes from the task's end and the directory's removal, then the close
	}
}

// A task that has not started (or a node that does not exist) cannot be watched yet:
// ErrNotFound tells the caller to look again when the job moves on.
func TestWatchOutputOfUnknownTaskIsNotFound(t *testing.T) {
	d := newDriver(t, "")
	create(t, d, "n1", "ws/c")
	if _, err := d.WatchOutput(ctxT(t), "n1", "nope"); !driver.IsNotFound(err) {
		t.Fatalf("unknown task: err = %v, want not found", err)
	}
	if _, err := d.WatchOutput(ctxT(t), "n2", "t1"); !driver.IsNotFound(err) {
		t.Fatalf("unknown node: err = %v, want not found", err)
	}
}
