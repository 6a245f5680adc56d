//go:build unix

package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent/proc"
)

// standbyPid prepares a standby agent now (Create does it in the background) and
// returns its pid.
func standbyPid(t *testing.T, d *Driver) int {
	t.Helper()
	d.prepareStandby()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.standby == nil {
		t.Fatal("no standby agent after prepareStandby")
	}
	return d.standby.Cmd.Process.Pid
}

// The next node after the first is served by the agent that waited on standby: the same
// process, recognised as that node's agent, running its tasks.
func TestCreateHandsTheNodeToTheStandbyAgent(t *testing.T) {
	d := newDriver(t, "")
	create(t, d, "n1", "ws/c")
	pid := standbyPid(t, d)
	create(t, d, "n2", "ws/c")
	if got := agentPid(t, d, "n2"); got != pid {
		t.Fatalf("n2's agent is pid %d, want the standby agent %d", got, pid)
	}
	if !nodeagent.IsAgentFor(pid, nodeDirOf(t, d, "n2")) {
		t.Fatal("the assigned standby agent is not recognised as n2's agent")
	}
	if nodeagent.IsAgentFor(pid, nodeDirOf(t, d, "n1")) {
		t.Fatal("the assigned standby agent is taken for n1's agent")
	}
	if _, err := d.Describe(ctxT(t), "n2"); err != nil {
		t.Fatalf("describe n2: %v", err)
	}
	if err := d.StartTask(ctxT(t), "n2", driver.TaskSpec{Key: "t1", Command: []string{"sh", "-c", "echo hi"}}); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, d); ev != (driver.Event{Kind: driver.TaskExited, NodeKey: "n2", TaskKey: "t1"}) {
		t.Fatalf("event %+v", ev)
	}
	if out, err := d.TaskOutput(ctxT(t), "n2", "t1", 0); err != nil || string(out) != "hi\n" {
		t.Fatalf("output %q %v", out, err)
	}
	// Its own log went to the node's agent.log once it was assigned, as Spawn's would.
	raw, err := os.ReadFile(filepath.Join(nodeDirOf(t, d, "n2"), nodeagent.LogFile))
	if err != nil || !strings.Contains(string(raw), "node agent serving") {
		t.Fatalf("n2's agent.log lacks the agent's log: %q %v", raw, err)
	}
}

// A process listing names the node each agent serves: the agent that waited on standby
// names its node's directory in its command line (/proc/PID/cmdline, what ps and pgrep -f
// read) once it is given the node, not the standby dir it was started with.
func TestAssignedStandbyAgentNamesItsNodeInItsCommandLine(t *testing.T) {
	d := newDriver(t, "")
	create(t, d, "n1", "ws/c")
	pid := standbyPid(t, d)
	before := waitCmdline(t, pid)
	if !strings.Contains(strings.Join(before, " "), nodeagent.StandbyDir) {
		t.Fatalf("a waiting standby agent's command line %q does not name the standby dir", before)
	}
	create(t, d, "n2", "ws/c")
	if got := agentPid(t, d, "n2"); got != pid {
		t.Fatalf("n2's agent is pid %d, want the standby agent %d", got, pid)
	}
	args, err := proc.Cmdline(pid)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(args, " ")
	want := "--dir " + nodeDirOf(t, d, "n2")
	if !strings.HasSuffix(strings.TrimRight(line, " "), want) || strings.Contains(line, nodeagent.StandbyDir) {
		t.Fatalf("the assigned agent's command line is %q; want it to end with %q and not name %s", line, want, nodeagent.StandbyDir)
	}
	if len(args) != len(before) {
		t.Fatalf("the assigned agent's command line has %d arguments, %q; want the %d it was started with", len(args), args, len(before))
	}
}

// A standby agent never outlives its driver.
func TestCloseEndsTheStandbyAgent(t *testing.T) {
	d := newDriver(t, "")
	create(t, d, "n1", "ws/c")
	pid := standbyPid(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if proc.Alive(pid) {
		t.Fatalf("standby agent %d still runs after Close", pid)
	}
}

// The next standby agent starts standbyDelay after a Create, not during it: the new
// node's first task has the CPU first.
func TestTheNextStandbyAgentStartsAfterTheDelay(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	d := newDriverWithClock(t, "", clk)
	create(t, d, "n1", "ws/c")
	hasStandby := func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.standby != nil
	}
	clk.Step(standbyDelay - time.Millisecond)
	if hasStandby() {
		t.Fatal("a standby agent started before standbyDelay passed")
	}
	clk.Step(time.Millisecond)
	deadline := time.Now().Add(waitLimit)
	for !hasStandby() {
		if time.Now().After(deadline) {
			t.Fatal("no standby agent once standbyDelay passed")
		}
		time.Sleep(time.Millisecond)
	}
}

// Closing the driver while the next standby agent waits for its delay starts none.
func TestCloseDuringTheStandbyDelayStartsNoAgent(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	d := newDriverWithClock(t, "", clk)
	create(t, d, "n1", "ws/c")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.standby != nil || d.preparing {
		t.Fatalf("after Close: standby %v, preparing %v", d.standby != nil, d.preparing)
	}
}

// waitCmdline returns pid's command line once it has one: a process just started by the
// driver shows an empty one until its exec completes (a real process; bounded).
func waitCmdline(t *testing.T, pid int) []string {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		args, err := proc.Cmdline(pid)
		if err != nil {
			t.Fatal(err)
		}
		if len(args) > 0 {
			return args
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d shows no command line after %s", pid, waitLimit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
