package instance

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/cluster"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/idle"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/schedule"
)

// Setup stages of the current start.
const (
	StageNone     = ""
	StageCreation = "creation"
	StageStartup  = "startup"
	StageDone     = "done"
)

// SetupJob is the job ID a node holds while it runs a setup script.
const SetupJob = "setup"

// Lifecycle is an instance's lifecycle as stored (model.Instance embeds it).
type Lifecycle struct {
	Desired       string        `json:"desired"` // Running or Stopped
	State         string        `json:"state"`
	LastOperation api.Operation `json:"last_operation"`
	LastActivity  time.Time     `json:"last_activity"`
	// SchedulesSeen: firings at or before it are applied (or predate the schedule).
	SchedulesSeen time.Time `json:"schedules_seen"`
	CreationDone  bool      `json:"creation_done,omitempty"`
	// StartSeq counts starts; setup task keys carry it so a stale exit is recognised.
	StartSeq     int       `json:"start_seq"`
	Stage        string    `json:"stage,omitempty"`
	StageRunning bool      `json:"stage_running,omitempty"`
	StageDue     time.Time `json:"stage_due,omitempty"` // the running script's timeout
	Error        string    `json:"error,omitempty"`
	Resizing     bool      `json:"resizing,omitempty"`
}

// New is the state of an instance created at now: it starts at once.
func New(now time.Time) Lifecycle {
	return Lifecycle{
		Desired: api.InstanceRunning, State: api.InstanceCreating,
		LastOperation: api.Operation{Name: "Create", Status: "InProgress", Trigger: api.TriggerUser, Time: now},
		LastActivity:  now, SchedulesSeen: now,
	}
}

// SetDesired makes desired the instance's desired state, as operation op by trigger, unless
// it is already there. Starting an instance whose setup scripts failed takes a fresh node, so
// the scripts run again.
func (s *Lifecycle) SetDesired(desired, op, trigger string, now time.Time) {
	if s.Desired == desired && s.State == desired {
		return
	}
	s.Desired = desired
	s.LastOperation = api.Operation{Name: op, Status: "InProgress", Trigger: trigger, Time: now}
	if desired == api.InstanceRunning && s.State == api.InstanceSetupFailed {
		s.Resizing = true
	}
}

// Touch records activity at t (idle.Activity.Touch: the later time wins).
func (s *Lifecycle) Touch(t time.Time) {
	s.LastActivity = idle.Activity{LastActivity: s.LastActivity}.Touch(t).LastActivity
}

// Act applies a user's start, stop or restart.
func (s *Lifecycle) Act(action string, now time.Time) error {
	switch action {
	case api.ActionStart:
		// A start restarts the idle clock; on a running instance that is all it does.
		s.Touch(now)
		s.SetDesired(api.InstanceRunning, "Start", api.TriggerUser, now)
	case api.ActionStop:
		s.SetDesired(api.InstanceStopped, "Stop", api.TriggerUser, now)
	case api.ActionRestart:
		// Restart: release the node (if any) and start a fresh one.
		s.Desired, s.Resizing = api.InstanceRunning, true
		s.LastOperation = api.Operation{Name: "Restart", Status: "InProgress", Trigger: api.TriggerUser, Time: now}
	default:
		return api.Errorf(api.CodeInvalid, "action", "unknown action %q; allowed: start, stop, restart", action)
	}
	return nil
}

// Script is one setup script as the rule needs it.
type Script struct {
	Command string
	Timeout time.Duration
}

// Node is the instance's live node (not released) as stored.
type Node struct {
	ID    string
	State string // api.NodeIdle etc.
	// JobID is the job the node runs, SetupJob while it runs a setup script, or empty.
	JobID     string
	IdleSince time.Time
}

// Input is what Decide reads.
type Input struct {
	Lifecycle Lifecycle
	Schedules []schedule.Entry
	// IdleAfter is idle_time_before_shutdown; zero never stops the instance.
	IdleAfter time.Duration
	// Creation and Startup are the setup scripts; nil when there is none.
	Creation, Startup *Script
	// Node is the live node; nil when there is none.
	Node *Node
	// Nodes counts the instance's node records, released ones still going included.
	Nodes int
	// Jobs are the instance's jobs that have not ended.
	Jobs []cluster.Job
	// Sessions counts the open interactive sessions.
	Sessions int
}

// Timer is a change of one timer: none, set to At, or cleared (At zero).
type Timer struct {
	Change bool
	At     time.Time
}

func setTimer(at time.Time) Timer { return Timer{Change: true, At: at} }

var clearTimer = Timer{Change: true}

// Setup is a setup script to start on the node now.
type Setup struct {
	Stage   string
	Task    string // the node's task key (SetupTask)
	Command string
}

// Decision is what one pass decided. The caller stores Lifecycle, then acts.
type Decision struct {
	Lifecycle Lifecycle
	// Fired is the schedule firing applied, if any.
	Fired *schedule.Firing
	// Schedule, SetupTimeout and Idle are the instance's timers.
	Schedule, SetupTimeout, Idle Timer
	// CancelJobs, when not empty, cancels every job of the instance for this reason.
	CancelJobs string
	// Release releases the node (killing its task first, if it has one).
	Release bool
	// Create creates a node.
	Create bool
	// KillSetup kills the node's setup script: it reached its timeout.
	KillSetup bool
	// Setup is a setup script to start.
	Setup *Setup
	// Assign is the queued job the node takes now.
	Assign string
	// Unplaceable are queued jobs that need more than the instance's one node.
	Unplaceable []string
	// IdleFor is set when the instance stops for idleness: how long it was idle.
	IdleFor time.Duration
	// Again asks for another pass at once (the state moved on and the next step is due).
	Again bool
}

// Decide returns what the instance does at now, from its stored state alone. The package
// documentation states the rules in order.
func Decide(in Input, now time.Time) Decision {
	d := Decision{Lifecycle: in.Lifecycle}
	s := &d.Lifecycle

	// Rule 1: schedules.
	if f, ok, err := schedule.Missed(in.Schedules, s.SchedulesSeen, now); err == nil && ok {
		desired, op := api.InstanceStopped, "Stop"
		if f.Action == schedule.ActionStart {
			desired, op = api.InstanceRunning, "Start"
		}
		s.SetDesired(desired, op, api.TriggerSchedule, now)
		d.Fired = &f
	}
	s.SchedulesSeen = now
	if f, ok, err := schedule.NextFiring(in.Schedules, now); err == nil && ok {
		d.Schedule = setTimer(f.At)
	} else {
		d.Schedule = clearTimer
	}

	// Rule 2: the node's idle time is activity.
	node := in.Node
	running := node != nil && node.JobID != "" && node.JobID != SetupJob
	if node != nil && node.State == api.NodeIdle {
		s.Touch(node.IdleSince)
	}

	switch {
	case s.Desired == api.InstanceStopped: // rule 3
		d.CancelJobs = "compute instance stopped"
		if node != nil {
			s.State, d.Release = api.InstanceStopping, true
			return d
		}
		if in.Nodes == 0 {
			s.State = api.InstanceStopped
			if s.LastOperation.Status == "InProgress" {
				s.LastOperation.Status = "Succeeded"
			}
		}
		return d

	case s.Resizing: // rule 4
		if node != nil {
			d.CancelJobs = "compute instance restarted"
			s.State, d.Release = api.InstanceResizing, true
			if s.LastOperation.Name == "Restart" {
				s.State = api.InstanceStarting
			}
			return d
		}
		if in.Nodes > 0 {
			return d // the old node is still being released
		}
		s.Resizing = false
		fallthrough

	case node == nil: // rule 5
		if in.Nodes > 0 {
			return d
		}
		s.StartSeq++
		s.Stage, s.StageRunning, s.Error = StageNone, false, ""
		if s.State != api.InstanceCreating {
			s.State = api.InstanceStarting
		}
		d.Create = true
		return d

	case s.State == api.InstanceSetupFailed: // rule 6
		return d

	case node.State == api.NodePreparing || node.State == api.NodeUnusable: // rule 7
		d.Release = node.State == api.NodeUnusable
		return d

	case s.Stage != StageDone: // rule 8
		if s.StageRunning {
			if !s.StageDue.IsZero() && !now.Before(s.StageDue) {
				d.KillSetup = true
			} else {
				d.SetupTimeout = setTimer(s.StageDue)
			}
			return d
		}
		stage, script := nextStage(s, in.Creation, in.Startup)
		if script == nil {
			s.Stage = StageDone
			s.State = api.InstanceRunning
			s.Touch(now)
			s.LastOperation.Status, s.LastOperation.Time = "Succeeded", now
			d.Again = true
			return d
		}
		s.Stage, s.StageRunning, s.StageDue = stage, true, now.Add(script.Timeout)
		d.Setup = &Setup{Stage: stage, Task: SetupTask(s.StartSeq, stage), Command: script.Command}
		d.SetupTimeout = setTimer(s.StageDue)
		return d
	}

	// Rule 9: one job at a time on the node, placed as a cluster places its jobs.
	if !running && node.State == api.NodeIdle {
		free := []cluster.Node{{ID: node.ID, State: node.State, IdleSince: node.IdleSince}}
		p := cluster.Place(free, in.Jobs, nil, 1)
		for id := range p.Assign { // one node: one job at most
			d.Assign, running = id, true
		}
		d.Unplaceable = p.Unplaceable
	}
	if running {
		s.State = api.InstanceJobRunning
	} else {
		s.State = api.InstanceRunning
	}

	// Rule 10: idle shutdown.
	if in.IdleAfter > 0 {
		a := idle.Activity{LastActivity: s.LastActivity, OpenSessions: in.Sessions}
		if running {
			a.RunningJobs = 1
		}
		switch dec := idle.Decide(a, in.IdleAfter, now); {
		case dec.Stop:
			d.Idle = clearTimer
			s.SetDesired(api.InstanceStopped, "Stop", api.TriggerIdleShutdown, now)
			d.IdleFor, d.Again = now.Sub(a.LastActivity), true
		case dec.Deadline.IsZero():
			d.Idle = clearTimer
		default:
			d.Idle = setTimer(dec.Deadline)
		}
	}
	return d
}

// nextStage returns the next setup script of the current start, or nil when none is left.
// An instance with no creation script has its creation done.
func nextStage(s *Lifecycle, creation, startup *Script) (string, *Script) {
	if !s.CreationDone && s.Stage == StageNone {
		if creation != nil {
			return StageCreation, creation
		}
		s.CreationDone = true
	}
	if s.Stage != StageStartup && startup != nil {
		return StageStartup, startup
	}
	return StageDone, nil
}

// SetupTask is the task key of a setup script: setup-<start seq>-<stage>.
func SetupTask(seq int, stage string) string { return fmt.Sprintf("setup-%d-%s", seq, stage) }

// ParseSetupTask parses a setup script's task key.
func ParseSetupTask(task string) (seq int, stage string, ok bool) {
	parts := strings.SplitN(task, "-", 3)
	if len(parts) != 3 || parts[0] != "setup" {
		return 0, "", false
	}
	seq, err := strconv.Atoi(parts[1])
	return seq, parts[2], err == nil
}

// Current reports whether a setup task belongs to the instance's current start and stage;
// the end of any other is stale.
func (s *Lifecycle) Current(task string) bool {
	seq, stage, ok := ParseSetupTask(task)
	return ok && s.StartSeq == seq && s.Stage == stage
}

// SetupNotStarted puts back a setup script the store records as running but its node never
// started (the engine stopped between the two): the next pass starts the same stage again
// under the same task key. It reports whether anything changed.
func (s *Lifecycle) SetupNotStarted() bool {
	if !s.StageRunning {
		return false
	}
	// With no stage begun, the next pass picks this one again: the creation script while
	// creation is not done, else the startup script.
	s.Stage, s.StageRunning, s.StageDue = StageNone, false, time.Time{}
	return true
}

// SetupExited applies the end of the running setup script with its exit code at now. A
// failure stops the start (SetupFailed) with an error naming the script, why it failed,
// where its output is (logPath) and its last lines (tail).
func (s *Lifecycle) SetupExited(code int, logPath, tail string, now time.Time) {
	s.StageRunning = false
	if code == 0 {
		if s.Stage == StageCreation {
			s.CreationDone = true
		}
		return
	}
	why := fmt.Sprintf("exited with status %d", code)
	if !s.StageDue.IsZero() && !now.Before(s.StageDue) {
		why = "timed out"
	}
	s.State = api.InstanceSetupFailed
	s.Error = fmt.Sprintf("%s_script %s; its output is in %s; last lines:\n%s", s.Stage, why, logPath, tail)
	s.LastOperation.Status, s.LastOperation.Time = "Failed", now
	if s.Stage == StageCreation {
		s.CreationDone = false
	}
}
