package instance

import (
	"reflect"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/cluster"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/schedule"
)

var now = time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC) // a Monday

// running is an instance whose node is up and whose setup is done, last active at now.
func running() Lifecycle {
	s := New(now.Add(-time.Hour))
	s.State, s.Stage, s.CreationDone, s.StartSeq = api.InstanceRunning, StageDone, true, 1
	s.LastOperation.Status = "Succeeded"
	s.LastActivity = now
	return s
}

func with(s Lifecycle, f func(*Lifecycle)) Lifecycle { f(&s); return s }

func idleNode(since time.Time) *Node {
	return &Node{ID: "n-1", State: api.NodeIdle, IdleSince: since}
}

func queued(id string, submitted time.Time, count int64) cluster.Job {
	return cluster.Job{ID: id, Status: api.JobQueued, Count: count, SubmittedAt: submitted}
}

func TestDecideTransitions(t *testing.T) {
	creation := &Script{Command: "echo made", Timeout: 10 * time.Minute}
	startup := &Script{Command: "echo up", Timeout: 5 * time.Minute}
	for _, tc := range []struct {
		name string
		in   Input
		// check compares the fields of the decision the case is about.
		want func(t *testing.T, d Decision)
	}{
		{
			name: "desired stopped with a node: jobs canceled, node released",
			in: Input{Lifecycle: with(running(), func(s *Lifecycle) { s.Desired = api.InstanceStopped }),
				Node: &Node{ID: "n-1", State: api.NodeRunning, JobID: "job-1"}, Nodes: 1},
			want: func(t *testing.T, d Decision) {
				expect(t, "state", d.Lifecycle.State, api.InstanceStopping)
				expect(t, "release", d.Release, true)
				expect(t, "cancel", d.CancelJobs, "compute instance stopped")
			},
		},
		{
			name: "desired stopped while the released node is still going: wait",
			in: Input{Lifecycle: with(running(), func(s *Lifecycle) { s.Desired, s.State = api.InstanceStopped, api.InstanceStopping }),
				Nodes: 1},
			want: func(t *testing.T, d Decision) {
				expect(t, "state", d.Lifecycle.State, api.InstanceStopping)
				expect(t, "release", d.Release, false)
			},
		},
		{
			name: "desired stopped and no node left: stopped, operation succeeded",
			in: Input{Lifecycle: with(running(), func(s *Lifecycle) {
				s.Desired, s.State = api.InstanceStopped, api.InstanceStopping
				s.LastOperation = api.Operation{Name: "Stop", Status: "InProgress"}
			})},
			want: func(t *testing.T, d Decision) {
				expect(t, "state", d.Lifecycle.State, api.InstanceStopped)
				expect(t, "operation", d.Lifecycle.LastOperation.Status, "Succeeded")
				expect(t, "create", d.Create, false)
			},
		},
		{
			name: "resize with a node: released, jobs canceled",
			in: Input{Lifecycle: with(running(), func(s *Lifecycle) {
				s.Resizing, s.LastOperation = true, api.Operation{Name: "Resize", Status: "InProgress"}
			}), Node: idleNode(now), Nodes: 1},
			want: func(t *testing.T, d Decision) {
				expect(t, "state", d.Lifecycle.State, api.InstanceResizing)
				expect(t, "release", d.Release, true)
				expect(t, "cancel", d.CancelJobs, "compute instance restarted")
			},
		},
		{
			name: "restart with a node: starting",
			in: Input{Lifecycle: with(running(), func(s *Lifecycle) {
				s.Resizing, s.LastOperation = true, api.Operation{Name: "Restart", Status: "InProgress"}
			}), Node: idleNode(now), Nodes: 1},
			want: func(t *testing.T, d Decision) {
				expect(t, "state", d.Lifecycle.State, api.InstanceStarting)
				expect(t, "release", d.Release, true)
			},
		},
		{
			name: "resize while the old node is released: wait",
			in:   Input{Lifecycle: with(running(), func(s *Lifecycle) { s.Resizing, s.State = true, api.InstanceResizing }), Nodes: 1},
			want: func(t *testing.T, d Decision) {
				expect(t, "resizing", d.Lifecycle.Resizing, true)
				expect(t, "create", d.Create, false)
			},
		},
		{
			name: "resize once the old node is gone: a fresh node, a new start",
			in:   Input{Lifecycle: with(running(), func(s *Lifecycle) { s.Resizing, s.State = true, api.InstanceResizing })},
			want: func(t *testing.T, d Decision) {
				expect(t, "resizing", d.Lifecycle.Resizing, false)
				expect(t, "create", d.Create, true)
				expect(t, "start seq", d.Lifecycle.StartSeq, 2)
				expect(t, "stage", d.Lifecycle.Stage, StageNone)
				expect(t, "state", d.Lifecycle.State, api.InstanceStarting)
			},
		},
		{
			name: "a new instance: its first node, still creating",
			in:   Input{Lifecycle: New(now)},
			want: func(t *testing.T, d Decision) {
				expect(t, "create", d.Create, true)
				expect(t, "state", d.Lifecycle.State, api.InstanceCreating)
				expect(t, "start seq", d.Lifecycle.StartSeq, 1)
			},
		},
		{
			name: "started after a stop: starting, the last error cleared",
			in: Input{Lifecycle: with(running(), func(s *Lifecycle) {
				s.State, s.Error, s.Stage, s.StageRunning = api.InstanceStopped, "old", StageStartup, true
			})},
			want: func(t *testing.T, d Decision) {
				expect(t, "create", d.Create, true)
				expect(t, "state", d.Lifecycle.State, api.InstanceStarting)
				expect(t, "error", d.Lifecycle.Error, "")
				expect(t, "stage running", d.Lifecycle.StageRunning, false)
			},
		},
		{
			name: "no live node but a released one going: wait",
			in:   Input{Lifecycle: running(), Nodes: 1},
			want: func(t *testing.T, d Decision) { expect(t, "create", d.Create, false) },
		},
		{
			name: "setup failed: nothing until the user starts it",
			in: Input{Lifecycle: with(running(), func(s *Lifecycle) { s.State, s.Stage = api.InstanceSetupFailed, StageCreation }),
				Node: idleNode(now), Nodes: 1, Creation: creation},
			want: func(t *testing.T, d Decision) {
				expect(t, "state", d.Lifecycle.State, api.InstanceSetupFailed)
				expect(t, "setup", d.Setup, (*Setup)(nil))
			},
		},
		{
			name: "node preparing: wait",
			in: Input{Lifecycle: with(New(now), func(s *Lifecycle) { s.StartSeq = 1 }),
				Node: &Node{ID: "n-1", State: api.NodePreparing}, Nodes: 1, Creation: creation},
			want: func(t *testing.T, d Decision) {
				expect(t, "release", d.Release, false)
				expect(t, "setup", d.Setup, (*Setup)(nil))
			},
		},
		{
			name: "node unusable: released, replaced on the next pass",
			in:   Input{Lifecycle: running(), Node: &Node{ID: "n-1", State: api.NodeUnusable}, Nodes: 1},
			want: func(t *testing.T, d Decision) { expect(t, "release", d.Release, true) },
		},
		{
			name: "fresh node: the creation script first",
			in: Input{Lifecycle: with(New(now), func(s *Lifecycle) { s.StartSeq = 1 }),
				Node: idleNode(now), Nodes: 1, Creation: creation, Startup: startup},
			want: func(t *testing.T, d Decision) {
				expect(t, "setup", *d.Setup, Setup{Stage: StageCreation, Task: "setup-1-creation", Command: "echo made"})
				expect(t, "stage due", d.Lifecycle.StageDue, now.Add(10*time.Minute))
				expect(t, "timeout timer", d.SetupTimeout, setTimer(now.Add(10*time.Minute)))
			},
		},
		{
			name: "creation done: the startup script",
			in: Input{Lifecycle: with(New(now), func(s *Lifecycle) { s.StartSeq, s.CreationDone = 2, true }),
				Node: idleNode(now), Nodes: 1, Creation: creation, Startup: startup},
			want: func(t *testing.T, d Decision) {
				expect(t, "setup", *d.Setup, Setup{Stage: StageStartup, Task: "setup-2-startup", Command: "echo up"})
			},
		},
		{
			name: "no scripts: running at once, the idle clock starts",
			in: Input{Lifecycle: with(New(now.Add(-time.Hour)), func(s *Lifecycle) { s.StartSeq = 1 }),
				Node: idleNode(now.Add(-time.Minute)), Nodes: 1},
			want: func(t *testing.T, d Decision) {
				expect(t, "state", d.Lifecycle.State, api.InstanceRunning)
				expect(t, "stage", d.Lifecycle.Stage, StageDone)
				expect(t, "creation done", d.Lifecycle.CreationDone, true)
				expect(t, "last activity", d.Lifecycle.LastActivity, now)
				expect(t, "operation", d.Lifecycle.LastOperation.Status, "Succeeded")
				expect(t, "again", d.Again, true)
			},
		},
		{
			name: "a script running before its timeout: the timeout timer",
			in: Input{Lifecycle: with(New(now), func(s *Lifecycle) {
				s.StartSeq, s.Stage, s.StageRunning, s.StageDue = 1, StageCreation, true, now.Add(time.Minute)
			}), Node: &Node{ID: "n-1", State: api.NodeRunning, JobID: SetupJob}, Nodes: 1, Creation: creation},
			want: func(t *testing.T, d Decision) {
				expect(t, "kill", d.KillSetup, false)
				expect(t, "timeout timer", d.SetupTimeout, setTimer(now.Add(time.Minute)))
			},
		},
		{
			name: "a script at its timeout: killed",
			in: Input{Lifecycle: with(New(now), func(s *Lifecycle) {
				s.StartSeq, s.Stage, s.StageRunning, s.StageDue = 1, StageCreation, true, now
			}), Node: &Node{ID: "n-1", State: api.NodeRunning, JobID: SetupJob}, Nodes: 1, Creation: creation},
			want: func(t *testing.T, d Decision) { expect(t, "kill", d.KillSetup, true) },
		},
		{
			name: "running: the node takes the first queued job (FIFO)",
			in: Input{Lifecycle: running(), Node: idleNode(now), Nodes: 1, Jobs: []cluster.Job{
				queued("job-2", now.Add(-time.Minute), 1), queued("job-1", now.Add(-2*time.Minute), 1),
			}},
			want: func(t *testing.T, d Decision) {
				expect(t, "assign", d.Assign, "job-1")
				expect(t, "state", d.Lifecycle.State, api.InstanceJobRunning)
			},
		},
		{
			name: "a job for more than one node cannot be placed; the next one can",
			in: Input{Lifecycle: running(), Node: idleNode(now), Nodes: 1, Jobs: []cluster.Job{
				queued("job-1", now.Add(-2*time.Minute), 2), queued("job-2", now.Add(-time.Minute), 1),
			}},
			want: func(t *testing.T, d Decision) {
				expect(t, "unplaceable", d.Unplaceable, []string{"job-1"})
				expect(t, "assign", d.Assign, "job-2")
			},
		},
		{
			name: "a job holds the node: job running, no idle deadline",
			in: Input{Lifecycle: running(), IdleAfter: 15 * time.Minute, Nodes: 1,
				Node: &Node{ID: "n-1", State: api.NodeRunning, JobID: "job-1"},
				Jobs: []cluster.Job{{ID: "job-1", Status: api.JobRunning, Count: 1}, queued("job-2", now, 1)}},
			want: func(t *testing.T, d Decision) {
				expect(t, "assign", d.Assign, "")
				expect(t, "state", d.Lifecycle.State, api.InstanceJobRunning)
				expect(t, "idle timer", d.Idle, clearTimer)
			},
		},
		{
			name: "idle less than the setting: the idle timer",
			in: Input{Lifecycle: with(running(), func(s *Lifecycle) { s.LastActivity = now.Add(-10 * time.Minute) }),
				IdleAfter: 15 * time.Minute, Node: idleNode(now.Add(-20 * time.Minute)), Nodes: 1},
			want: func(t *testing.T, d Decision) {
				expect(t, "idle timer", d.Idle, setTimer(now.Add(5*time.Minute)))
				expect(t, "desired", d.Lifecycle.Desired, api.InstanceRunning)
			},
		},
		{
			name: "the node's idle time is activity",
			in: Input{Lifecycle: with(running(), func(s *Lifecycle) { s.LastActivity = now.Add(-time.Hour) }),
				IdleAfter: 15 * time.Minute, Node: idleNode(now.Add(-5 * time.Minute)), Nodes: 1},
			want: func(t *testing.T, d Decision) {
				expect(t, "last activity", d.Lifecycle.LastActivity, now.Add(-5*time.Minute))
				expect(t, "idle timer", d.Idle, setTimer(now.Add(10*time.Minute)))
			},
		},
		{
			name: "idle for the setting: stopped for idleness",
			in: Input{Lifecycle: with(running(), func(s *Lifecycle) { s.LastActivity = now.Add(-20 * time.Minute) }),
				IdleAfter: 15 * time.Minute, Node: idleNode(now.Add(-time.Hour)), Nodes: 1},
			want: func(t *testing.T, d Decision) {
				expect(t, "desired", d.Lifecycle.Desired, api.InstanceStopped)
				expect(t, "trigger", d.Lifecycle.LastOperation.Trigger, api.TriggerIdleShutdown)
				expect(t, "idle for", d.IdleFor, 20*time.Minute)
				expect(t, "idle timer", d.Idle, clearTimer)
				expect(t, "again", d.Again, true)
			},
		},
		{
			name: "an open session keeps it awake",
			in: Input{Lifecycle: with(running(), func(s *Lifecycle) { s.LastActivity = now.Add(-time.Hour) }),
				IdleAfter: 15 * time.Minute, Sessions: 1, Node: idleNode(now.Add(-time.Hour)), Nodes: 1},
			want: func(t *testing.T, d Decision) {
				expect(t, "desired", d.Lifecycle.Desired, api.InstanceRunning)
				expect(t, "idle timer", d.Idle, clearTimer)
			},
		},
		{
			name: "idle shutdown off: the idle timer is left alone",
			in: Input{Lifecycle: with(running(), func(s *Lifecycle) { s.LastActivity = now.Add(-time.Hour) }),
				Node: idleNode(now.Add(-time.Hour)), Nodes: 1},
			want: func(t *testing.T, d Decision) {
				expect(t, "idle timer", d.Idle, Timer{})
				expect(t, "desired", d.Lifecycle.Desired, api.InstanceRunning)
			},
		},
		{
			name: "no schedule: the schedule timer is cleared",
			in:   Input{Lifecycle: running(), Node: idleNode(now), Nodes: 1},
			want: func(t *testing.T, d Decision) {
				expect(t, "schedule timer", d.Schedule, clearTimer)
				expect(t, "schedules seen", d.Lifecycle.SchedulesSeen, now)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.want(t, Decide(tc.in, now)) })
	}
}

func TestDecideSchedules(t *testing.T) {
	stopAt9 := schedule.Entry{Key: "ws/dev/0", Action: schedule.ActionStop, Cron: "0 9 * * *", Enabled: true}
	startAt10 := schedule.Entry{Key: "ws/dev/1", Action: schedule.ActionStart, Cron: "0 10 * * *", Enabled: true}
	entries := []schedule.Entry{stopAt9, startAt10}

	t.Run("a firing missed since the last pass applies, and the next is the timer", func(t *testing.T) {
		s := with(running(), func(s *Lifecycle) { s.SchedulesSeen = now.Add(-time.Hour) })
		d := Decide(Input{Lifecycle: s, Schedules: entries, Node: idleNode(now), Nodes: 1}, now)
		if d.Fired == nil || d.Fired.Action != schedule.ActionStop || !d.Fired.At.Equal(now.Add(-30*time.Minute)) {
			t.Fatalf("fired = %+v; want the stop at 09:00", d.Fired)
		}
		expect(t, "desired", d.Lifecycle.Desired, api.InstanceStopped)
		expect(t, "operation", d.Lifecycle.LastOperation, api.Operation{Name: "Stop", Status: "InProgress", Trigger: api.TriggerSchedule, Time: now})
		expect(t, "state", d.Lifecycle.State, api.InstanceStopping)
		expect(t, "schedule timer", d.Schedule, setTimer(now.Add(30*time.Minute)))
	})
	t.Run("a firing before SchedulesSeen does not apply again", func(t *testing.T) {
		s := with(running(), func(s *Lifecycle) { s.SchedulesSeen = now.Add(-20 * time.Minute) })
		d := Decide(Input{Lifecycle: s, Schedules: entries, Node: idleNode(now), Nodes: 1}, now)
		expect(t, "fired", d.Fired, (*schedule.Firing)(nil))
		expect(t, "desired", d.Lifecycle.Desired, api.InstanceRunning)
	})
	t.Run("a start firing starts a stopped instance", func(t *testing.T) {
		s := with(running(), func(s *Lifecycle) {
			s.Desired, s.State, s.SchedulesSeen = api.InstanceStopped, api.InstanceStopped, now
		})
		at := now.Add(31 * time.Minute)
		d := Decide(Input{Lifecycle: s, Schedules: entries}, at)
		expect(t, "desired", d.Lifecycle.Desired, api.InstanceRunning)
		expect(t, "create", d.Create, true)
		expect(t, "state", d.Lifecycle.State, api.InstanceStarting)
	})
}

// TestLifecycleOnAFakeClock plays one instance's life with the rule alone: the caller's part
// (storing the decision, the node's state) is done by hand between passes, the time moves
// on a fake clock.
func TestLifecycleOnAFakeClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(now)
	in := Input{Lifecycle: New(clk.Now()), IdleAfter: 30 * time.Minute, Startup: &Script{Command: "true", Timeout: time.Minute}}
	pass := func() Decision {
		d := Decide(in, clk.Now())
		in.Lifecycle = d.Lifecycle
		return d
	}
	if d := pass(); !d.Create {
		t.Fatalf("first pass: want a node created, got %+v", d)
	}
	in.Nodes, in.Node = 1, &Node{ID: "n-1", State: api.NodePreparing}
	clk.Step(time.Minute)
	in.Node.State, in.Node.IdleSince = api.NodeIdle, clk.Now()
	d := pass()
	if d.Setup == nil || d.Setup.Task != "setup-1-startup" {
		t.Fatalf("node ready: want the startup script, got %+v", d)
	}
	in.Node.State, in.Node.JobID = api.NodeRunning, SetupJob
	clk.Step(10 * time.Second)
	if !in.Lifecycle.Current("setup-1-startup") || in.Lifecycle.Current("setup-0-startup") {
		t.Fatal("Current: want the running stage's task only")
	}
	in.Lifecycle.SetupExited(0, "log", "", clk.Now())
	in.Node.State, in.Node.JobID, in.Node.IdleSince = api.NodeIdle, "", clk.Now()
	if d := pass(); d.Lifecycle.State != api.InstanceRunning || !d.Again {
		t.Fatalf("script done: want running, got %+v", d.Lifecycle)
	}
	started := clk.Now()
	d = pass()
	expect(t, "idle timer", d.Idle, setTimer(started.Add(30*time.Minute)))
	clk.Step(30 * time.Minute)
	d = pass()
	expect(t, "desired", d.Lifecycle.Desired, api.InstanceStopped)
	d = pass()
	if !d.Release || d.Lifecycle.State != api.InstanceStopping {
		t.Fatalf("stopping: want the node released, got %+v", d)
	}
	in.Node, in.Nodes = nil, 0
	expect(t, "state", pass().Lifecycle.State, api.InstanceStopped)
	// A user's start: a fresh node, and the startup script again.
	if err := in.Lifecycle.Act(api.ActionStart, clk.Now()); err != nil {
		t.Fatal(err)
	}
	d = pass()
	expect(t, "create", d.Create, true)
	expect(t, "start seq", d.Lifecycle.StartSeq, 2)
}

func TestSetupExited(t *testing.T) {
	base := with(New(now), func(s *Lifecycle) {
		s.StartSeq, s.Stage, s.StageRunning, s.StageDue = 1, StageCreation, true, now.Add(time.Minute)
	})
	t.Run("success of the creation script", func(t *testing.T) {
		s := base
		s.SetupExited(0, "x.log", "", now)
		expect(t, "running", s.StageRunning, false)
		expect(t, "creation done", s.CreationDone, true)
	})
	t.Run("failure", func(t *testing.T) {
		s := base
		s.SetupExited(3, "x.log", "boom", now)
		expect(t, "state", s.State, api.InstanceSetupFailed)
		expect(t, "error", s.Error, "creation_script exited with status 3; its output is in x.log; last lines:\nboom")
		expect(t, "operation", s.LastOperation.Status, "Failed")
	})
	t.Run("killed at its timeout", func(t *testing.T) {
		s := base
		s.SetupExited(137, "x.log", "", now.Add(time.Minute))
		if !strings.HasPrefix(s.Error, "creation_script timed out;") {
			t.Fatalf("error = %q; want a timeout", s.Error)
		}
	})
	t.Run("not started: the stage is begun again", func(t *testing.T) {
		s := base
		expect(t, "changed", s.SetupNotStarted(), true)
		expect(t, "stage", s.Stage, StageNone)
		expect(t, "changed again", s.SetupNotStarted(), false)
	})
}

func TestAct(t *testing.T) {
	stopped := with(running(), func(s *Lifecycle) { s.Desired, s.State = api.InstanceStopped, api.InstanceStopped })
	s := stopped
	if err := s.Act(api.ActionStart, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	expect(t, "desired", s.Desired, api.InstanceRunning)
	expect(t, "last activity", s.LastActivity, now.Add(time.Hour))

	failed := with(running(), func(s *Lifecycle) { s.State = api.InstanceSetupFailed })
	if err := failed.Act(api.ActionStart, now); err != nil {
		t.Fatal(err)
	}
	expect(t, "a start after failed setup takes a fresh node", failed.Resizing, true)

	r := running()
	if err := r.Act(api.ActionRestart, now); err != nil {
		t.Fatal(err)
	}
	expect(t, "restart", r.Resizing, true)
	expect(t, "operation", r.LastOperation.Name, "Restart")

	unchanged := running()
	if err := unchanged.Act(api.ActionStart, now); err != nil {
		t.Fatal(err)
	}
	expect(t, "a start of a running instance keeps its operation", unchanged.LastOperation.Name, "Create")

	err := r.Act("reboot", now)
	if e, ok := err.(*api.Error); !ok || e.Field != "action" || !strings.Contains(e.Message, "allowed: start, stop, restart") {
		t.Fatalf("unknown action: got %v", err)
	}
}

func TestParseSetupTask(t *testing.T) {
	for task, want := range map[string]struct {
		seq   int
		stage string
		ok    bool
	}{
		"setup-3-startup":   {3, StageStartup, true},
		"setup-x-startup":   {0, "startup", false},
		"job-1.0-0":         {0, "", false},
		"setup-12-creation": {12, StageCreation, true},
	} {
		seq, stage, ok := ParseSetupTask(task)
		if ok != want.ok || (ok && (seq != want.seq || stage != want.stage)) {
			t.Errorf("ParseSetupTask(%q) = %d, %q, %v; want %+v", task, seq, stage, ok, want)
		}
	}
	expect(t, "round trip", SetupTask(7, StageCreation), "setup-7-creation")
}

func expect(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s = %+v; want %+v", what, got, want)
	}
}
