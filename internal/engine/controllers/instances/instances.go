// Package instances is the compute instances' controller. A compute instance is a compute
// of one node that a person uses. The engine keeps its desired state (Running or Stopped,
// set by the user, a schedule or idle shutdown) apart from its arguments, so an apply that
// changes arguments never restarts an instance that was stopped. A pass over an instance
// fires due schedules (rules/schedule), brings a node up or down to match the desired
// state, runs the setup scripts on a fresh node (creation once, startup at every start),
// gives queued jobs the node, and stops it when idle (rules/idle). The idle rule's inputs
// (LastActivity, open sessions, the running job) are all written here.
package instances

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/idle"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/schedule"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// Controller runs compute instances on the shared compute core.
type Controller struct {
	*computes.Core
	log hclog.Logger
	// minIdleShutdown is the engine's idle-shutdown policy minimum.
	minIdleShutdown time.Duration
	// sessions counts open interactive sessions per compute key (guarded by Core.Mu).
	sessions map[string]int
}

// New builds the controller and registers its pass for compute instances.
func New(core *computes.Core, minIdleShutdown time.Duration) *Controller {
	c := &Controller{Core: core, log: core.Log.Named("instances"), minIdleShutdown: minIdleShutdown, sessions: map[string]int{}}
	core.RegisterPass(api.TypeComputeInstance, c.Pass)
	return c
}

// Create validates an instance spec and stores the instance, which starts at once.
func (c *Controller) Create(ctx context.Context, workspace string, spec api.ComputeSpec, idempotencyKey string) (*api.Compute, error) {
	if err := validation.ComputeName.Check("name", spec.Name); err != nil {
		return nil, err
	}
	size, err := validation.VMSize("vm_size", spec.VMSize, catalog.ComputeInstance)
	if err != nil {
		return nil, err
	}
	rec, err := c.newInstanceRecord(spec, size, workspace, c.Clock.Now().UTC())
	if err != nil {
		return nil, err
	}
	return c.Insert(ctx, rec, idempotencyKey, rec.QuotaField())
}

// Update changes an instance's description, tags, size and settings in place.
func (c *Controller) Update(ctx context.Context, workspace, name string, upd api.ComputeUpdate) (*api.Compute, error) {
	return c.Modify(ctx, workspace, name, func(_ *api.Workspace, rec *model.Compute) error {
		if upd.ScaleSettings != nil {
			return api.Errorf(api.CodeInvalid, "scale_settings", "compute instance %q has no scale settings", name)
		}
		rec.Description, rec.Tags = upd.Description, upd.Tags
		return c.updateInstance(rec, upd, c.Clock.Now().UTC())
	})
}

func instanceTimer(kind runtime.TimerKind, computeKey string) runtime.Timer {
	return runtime.Timer{Kind: kind, Object: runtime.ComputeKey(computeKey)}
}

// Setup stages of the current start.
const (
	stageNone     = ""
	stageCreation = "creation"
	stageStartup  = "startup"
	stageDone     = "done"
)

func (c *Controller) instanceIdleAfter(rec model.Compute) time.Duration {
	return rec.Durations.IdleShutdownAfter
}

func normalizeInstance(s *api.InstanceSettings) api.InstanceSettings {
	if s == nil {
		return api.InstanceSettings{}
	}
	out := *s
	out.Schedules = nil
	for _, sc := range s.Schedules {
		out.Schedules = append(out.Schedules, sc.WithDefaults())
	}
	if ss := s.SetupScripts; ss != nil {
		c := *ss
		for _, p := range []**api.SetupScript{&c.CreationScript, &c.StartupScript} {
			if *p != nil {
				script := **p
				if script.Timeout == "" {
					script.Timeout = api.DefaultSetupScriptTimeout
				}
				*p = &script
			}
		}
		out.SetupScripts = &c
	}
	return out
}

// validateInstance checks an instance's settings against the engine's idle policy.
func (c *Controller) validateInstance(s api.InstanceSettings) error {
	if _, err := validation.IdleTimeBeforeShutdown(s.IdleTimeBeforeShutdown, c.minIdleShutdown); err != nil {
		return prefixField(err, "instance.")
	}
	if err := validation.Schedules(s.Schedules); err != nil {
		return prefixField(err, "instance.")
	}
	if ss := s.SetupScripts; ss != nil {
		for name, sc := range map[string]*api.SetupScript{"creation_script": ss.CreationScript, "startup_script": ss.StartupScript} {
			if sc == nil {
				continue
			}
			field := "instance.setup_scripts." + name + ".timeout"
			if _, err := validation.Duration(field, sc.Timeout, time.Second, 24*time.Hour); err != nil {
				return err
			}
		}
	}
	return nil
}

func prefixField(err error, prefix string) error {
	if e, ok := err.(*api.Error); ok && e.Field != "" {
		out := *e
		out.Field = prefix + e.Field
		return &out
	}
	return err
}

// newInstanceRecord makes the record of a new instance, which starts at once.
func (c *Controller) newInstanceRecord(spec api.ComputeSpec, size catalog.Size, workspace string, now time.Time) (model.Compute, error) {
	settings := normalizeInstance(spec.Instance)
	if err := c.validateInstance(settings); err != nil {
		return model.Compute{}, err
	}
	return model.Compute{
		Workspace: workspace, Name: spec.Name, Type: api.TypeComputeInstance, VMSize: size.Name,
		VMPriority: api.PriorityDedicated, Description: spec.Description, Tags: spec.Tags, CreatedOn: now,
		Instance: &model.Instance{
			Settings: settings, Desired: api.InstanceRunning, State: api.InstanceCreating,
			LastOperation: api.Operation{Name: "Create", Status: "InProgress", Trigger: api.TriggerUser, Time: now},
			LastActivity:  now, SchedulesSeen: now,
		},
	}, nil
}

// updateInstance applies an update to an instance record. Callers hold c.Mu.
func (c *Controller) updateInstance(rec *model.Compute, upd api.ComputeUpdate, now time.Time) error {
	inst := rec.Instance
	if upd.VMSize != "" {
		size, err := validation.VMSize("vm_size", upd.VMSize, catalog.ComputeInstance)
		if err != nil {
			return err
		}
		if size.Name != rec.VMSize {
			rec.VMSize = size.Name
			inst.Resizing = true
			inst.LastOperation = api.Operation{Name: "Resize", Status: "InProgress", Trigger: api.TriggerUser, Time: now}
		}
	}
	if upd.Instance != nil {
		settings := normalizeInstance(upd.Instance)
		if err := c.validateInstance(settings); err != nil {
			return err
		}
		oldIdle := c.instanceIdleAfter(*rec)
		newIdle, _ := validation.IdleTimeBeforeShutdown(settings.IdleTimeBeforeShutdown, 0)
		inst.LastActivity = idle.OnSettingChange(c.activity(*rec), oldIdle, newIdle, now)
		if fmt.Sprint(settings.Schedules) != fmt.Sprint(inst.Settings.Schedules) {
			inst.SchedulesSeen = now // a new schedule never fires for a time before it existed
		}
		inst.Settings = settings
	}
	return nil
}

// activity is an instance's activity as the idle rule sees it.
func (c *Controller) activity(rec model.Compute) idle.Activity {
	a := idle.Activity{LastActivity: rec.Instance.LastActivity, OpenSessions: c.sessions[rec.Key()]}
	if rec.Instance.State == api.InstanceJobRunning {
		a.RunningJobs = 1
	}
	return a
}

// InstanceAction starts, stops or restarts an instance for a user.
func (c *Controller) InstanceAction(_ context.Context, workspace, name, action string) (*api.Compute, error) {
	c.Mu.Lock()
	now := c.Clock.Now().UTC()
	err := c.Store.Update(func(tx *store.Tx) error {
		rec, err := model.GetCompute(tx, workspace, name)
		if err != nil || rec.Serverless {
			return model.NotFoundCompute(workspace, name)
		}
		if rec.Instance == nil {
			return api.Errorf(api.CodeInvalid, "", "compute %q is a %s; only compute instances start and stop", name, rec.Type)
		}
		switch action {
		case api.ActionStart:
			// A start restarts the idle clock; on a running instance that is all it does.
			rec.Instance.LastActivity = c.activity(rec).Touch(now).LastActivity
			c.setDesired(&rec, api.InstanceRunning, "Start", api.TriggerUser, now)
		case api.ActionStop:
			c.setDesired(&rec, api.InstanceStopped, "Stop", api.TriggerUser, now)
		case api.ActionRestart:
			// Restart: release the node (if any) and start a fresh one.
			rec.Instance.Desired, rec.Instance.Resizing = api.InstanceRunning, true
			rec.Instance.LastOperation = api.Operation{Name: "Restart", Status: "InProgress", Trigger: api.TriggerUser, Time: now}
		default:
			return api.Errorf(api.CodeInvalid, "action", "unknown action %q; allowed: start, stop, restart", action)
		}
		return tx.Put(store.Computes, rec.Key(), rec)
	})
	c.Mu.Unlock()
	if err != nil {
		return nil, err
	}
	c.Kick(workspace + "/" + name)
	return c.GetCompute(context.Background(), workspace, name)
}

// ReportActivity records activity on an instance reported by an application on it.
func (c *Controller) ReportActivity(_ context.Context, workspace, name string) error {
	c.Mu.Lock()
	err := c.Store.Update(func(tx *store.Tx) error {
		rec, err := model.GetCompute(tx, workspace, name)
		if err != nil || rec.Instance == nil {
			return model.NotFoundCompute(workspace, name)
		}
		rec.Instance.LastActivity = c.activity(rec).Touch(c.Clock.Now().UTC()).LastActivity
		return tx.Put(store.Computes, rec.Key(), rec)
	})
	c.Mu.Unlock()
	if err == nil {
		c.Kick(workspace + "/" + name)
	}
	return err
}

// OpenSession and CloseSession count interactive sessions on an instance: an open
// session keeps it awake, and closing one counts as activity.
func (c *Controller) OpenSession(workspace, name string) {
	c.Mu.Lock()
	c.sessions[workspace+"/"+name]++
	c.Mu.Unlock()
	c.Kick(workspace + "/" + name)
}

func (c *Controller) CloseSession(workspace, name string) {
	key := workspace + "/" + name
	c.Mu.Lock()
	if c.sessions[key] > 0 {
		c.sessions[key]--
	}
	_ = c.Store.Update(func(tx *store.Tx) error {
		rec, err := model.GetCompute(tx, workspace, name)
		if err != nil || rec.Instance == nil {
			return nil
		}
		rec.Instance.LastActivity = c.activity(rec).Touch(c.Clock.Now().UTC()).LastActivity
		return tx.Put(store.Computes, key, rec)
	})
	c.Mu.Unlock()
	c.Kick(key)
}

func (c *Controller) setDesired(rec *model.Compute, desired, op, trigger string, now time.Time) {
	inst := rec.Instance
	if inst.Desired == desired && inst.State == desired {
		return
	}
	inst.Desired = desired
	inst.LastOperation = api.Operation{Name: op, Status: "InProgress", Trigger: trigger, Time: now}
	if desired == api.InstanceRunning && inst.State == api.InstanceSetupFailed {
		inst.Resizing = true // a fresh node, so the scripts run again
	}
}

// Pass decides one pass for an instance. It runs inside the pass's transaction under the
// core's lock; what it decides is carried out once committed.
func (c *Controller) Pass(tx *store.Tx, rec *model.Compute, nodes []model.Node, jobs []model.Job, now time.Time) (computes.Actions, error) {
	out := computes.Actions{SaveCompute: true}
	inst := rec.Instance
	key := rec.Key()

	// Schedules: apply the latest firing due since the last pass (also one missed while
	// the engine was down), then wait for the next.
	entries := scheduleEntries(*rec)
	if f, ok, err := schedule.Missed(entries, inst.SchedulesSeen, now); err == nil && ok {
		desired, op := api.InstanceStopped, "Stop"
		if f.Action == schedule.ActionStart {
			desired, op = api.InstanceRunning, "Start"
		}
		c.setDesired(rec, desired, op, api.TriggerSchedule, now)
		out.Log(hclog.Info, "schedule fired", "compute", key, "action", f.Action, "at", f.At)
	}
	inst.SchedulesSeen = now
	if f, ok, err := schedule.NextFiring(entries, now); err == nil && ok {
		out.SetTimer(instanceTimer(runtime.Schedule, key), f.At)
	} else {
		out.ClearTimer(instanceTimer(runtime.Schedule, key))
	}

	var node *model.Node
	for i := range nodes {
		if !nodes[i].Released {
			node = &nodes[i]
		}
	}
	running := node != nil && node.JobID != "" && node.JobID != "setup"
	if node != nil && node.State == api.NodeIdle {
		// The node's idle_since is when its last job (or setup script) ended.
		inst.LastActivity = c.activity(*rec).Touch(node.IdleSince).LastActivity
	}

	release := func() error {
		if node == nil {
			return nil
		}
		if node.Task != "" {
			out.KillTasks = append(out.KillTasks, computes.TaskRef{Node: node.ID, Task: node.Task})
		}
		node.MarkReleased(now)
		if err := tx.Put(store.Nodes, node.Key(), *node); err != nil {
			return err
		}
		out.Release = append(out.Release, *node)
		return nil
	}
	cancelJobs := func(why string) error {
		for _, j := range jobs {
			j.Finish(api.JobCanceled, nil, why, now)
			if err := model.PutJob(tx, j); err != nil {
				return err
			}
			out.KillJobs = append(out.KillJobs, j)
		}
		return nil
	}

	switch {
	case inst.Desired == api.InstanceStopped:
		if err := cancelJobs("compute instance stopped"); err != nil {
			return out, err
		}
		if node != nil {
			inst.State = api.InstanceStopping
			return out, release()
		}
		if len(nodes) == 0 {
			inst.State = api.InstanceStopped
			if inst.LastOperation.Status == "InProgress" {
				inst.LastOperation.Status = "Succeeded"
			}
		}
		return out, nil

	case inst.Resizing:
		if node != nil {
			if err := cancelJobs("compute instance restarted"); err != nil {
				return out, err
			}
			inst.State = api.InstanceResizing
			if inst.LastOperation.Name == "Restart" {
				inst.State = api.InstanceStarting
			}
			return out, release()
		}
		if len(nodes) > 0 {
			return out, nil // the old node is still being released
		}
		inst.Resizing = false
		fallthrough

	case node == nil:
		if len(nodes) > 0 {
			return out, nil
		}
		inst.StartSeq++
		inst.Stage, inst.StageRunning, inst.Error = stageNone, false, ""
		if inst.State != api.InstanceCreating {
			inst.State = api.InstanceStarting
		}
		n := c.NewNode(*rec, now)
		return out, tx.Put(store.Nodes, n.Key(), n)

	case inst.State == api.InstanceSetupFailed:
		return out, nil

	case node.State == api.NodePreparing || node.State == api.NodeUnusable:
		if node.State == api.NodeUnusable {
			return out, release() // replaced on the next pass
		}
		return out, nil

	case inst.Stage != stageDone:
		if inst.StageRunning {
			if !inst.StageDue.IsZero() && !now.Before(inst.StageDue) {
				out.KillTasks = append(out.KillTasks, computes.TaskRef{Node: node.ID, Task: node.Task})
			} else {
				out.SetTimer(instanceTimer(runtime.SetupTimeout, key), inst.StageDue)
			}
			return out, nil
		}
		stage, script := nextStage(inst)
		if script == nil {
			inst.Stage = stageDone
			inst.State, inst.LastActivity = api.InstanceRunning, c.activity(*rec).Touch(now).LastActivity
			inst.LastOperation.Status, inst.LastOperation.Time = "Succeeded", now
			c.Kick(key)
			return out, nil
		}
		timeout, _ := validation.Duration("timeout", script.Timeout, time.Second, 24*time.Hour)
		inst.Stage, inst.StageRunning, inst.StageDue = stage, true, now.Add(timeout)
		task := fmt.Sprintf("setup-%d-%s", inst.StartSeq, stage)
		node.State, node.JobID, node.Task = api.NodeRunning, "setup", task
		if err := tx.Put(store.Nodes, node.Key(), *node); err != nil {
			return out, err
		}
		spec, nodeID := driver.TaskSpec{Key: task, Command: []string{"sh", "-c", script.Inline}, Env: map[string]string{"MLCOMPUTE_COMPUTE": rec.Name, "MLCOMPUTE_WORKSPACE": rec.Workspace}}, node.ID
		out.Run = append(out.Run, func(ctx context.Context) {
			if err := c.Driver.StartTask(ctx, nodeID, spec); err != nil {
				if ctx.Err() != nil || errors.Is(err, context.Canceled) {
					return // the engine is stopping; its next start runs the script (SetupNotStarted)
				}
				c.log.Error("starting setup script failed", "node", nodeID, "error", err)
				c.SetupExited(ctx, nodeID, spec.Key, 127)
			}
		})
		out.SetTimer(instanceTimer(runtime.SetupTimeout, key), inst.StageDue)
		return out, nil
	}

	// Running: one job at a time on the instance's node.
	if !running && node.State == api.NodeIdle {
		for _, j := range jobs {
			if j.Status != api.JobQueued {
				continue
			}
			j.Status, j.Nodes = api.JobPreparing, []string{node.ID}
			node.State, node.JobID, node.Rank, node.Task, node.IdleSince = api.NodeRunning, j.ID, 0, j.TaskKey(0), time.Time{}
			if err := tx.Put(store.Nodes, node.Key(), *node); err != nil {
				return out, err
			}
			if err := model.PutJob(tx, j); err != nil {
				return out, err
			}
			out.StartJobs = append(out.StartJobs, j)
			running = true
			break
		}
	}
	if running {
		inst.State = api.InstanceJobRunning
	} else {
		inst.State = api.InstanceRunning
	}

	// Idle shutdown, decided from this pass's facts (a job that just ended or just started
	// counts as of now), after queued jobs were given the node.
	if after := c.instanceIdleAfter(*rec); after > 0 {
		a := idle.Activity{LastActivity: inst.LastActivity, OpenSessions: c.sessions[key]}
		if running {
			a.RunningJobs = 1
		}
		if d := idle.Decide(a, after, now); !d.Stop && d.Deadline.IsZero() {
			out.ClearTimer(instanceTimer(runtime.InstanceIdle, key))
		} else if !d.Stop {
			out.SetTimer(instanceTimer(runtime.InstanceIdle, key), d.Deadline)
		} else {
			out.ClearTimer(instanceTimer(runtime.InstanceIdle, key))
			c.setDesired(rec, api.InstanceStopped, "Stop", api.TriggerIdleShutdown, now)
			out.Log(hclog.Warn, "instance stopped for idleness", "compute", key, "idle_for", now.Sub(a.LastActivity).String())
			c.Kick(key)
		}
	}
	return out, nil
}

// nextStage returns the next setup script of the current start, or nil when none is left.
func nextStage(inst *model.Instance) (string, *api.SetupScript) {
	ss := inst.Settings.SetupScripts
	if ss == nil {
		ss = &api.SetupScripts{}
	}
	if !inst.CreationDone && inst.Stage == stageNone {
		if ss.CreationScript != nil {
			return stageCreation, ss.CreationScript
		}
		inst.CreationDone = true
	}
	if inst.Stage != stageStartup && ss.StartupScript != nil {
		return stageStartup, ss.StartupScript
	}
	return stageDone, nil
}

func scheduleEntries(rec model.Compute) []schedule.Entry {
	var out []schedule.Entry
	for i, s := range rec.Instance.Settings.Schedules {
		out = append(out, schedule.Entry{Key: rec.Key() + "/" + strconv.Itoa(i), Action: s.Action, Cron: s.Cron, TimeZone: s.TimeZone, Enabled: s.IsEnabled()})
	}
	return out
}

// setupTask parses a setup script's task key, setup-<start seq>-<stage>.
func setupTask(task string) (seq int, stage string, ok bool) {
	parts := strings.SplitN(task, "-", 3)
	if len(parts) != 3 || parts[0] != "setup" {
		return 0, "", false
	}
	seq, err := strconv.Atoi(parts[1])
	return seq, parts[2], err == nil
}

// updateSetup applies change to the node running a setup task and to its instance, when
// the instance is still at that task's start and stage, and commits both unless change
// declines (returns false). It returns the instance's key ("" when no node runs the task),
// the task's stage, and whether it committed.
func (c *Controller) updateSetup(nodeID, task string, change func(n *model.Node, rec *model.Compute, now time.Time) bool) (key, stage string, changed bool) {
	seq, stage, ok := setupTask(task)
	if !ok {
		return "", "", false
	}
	c.Mu.Lock()
	defer c.Mu.Unlock()
	now := c.Clock.Now().UTC()
	_ = c.Store.Update(func(tx *store.Tx) error {
		n, ok := c.NodeByID(tx, nodeID)
		if !ok || n.Task != task {
			return nil
		}
		var rec model.Compute
		key = n.Compute
		if ok, err := tx.Get(store.Computes, key, &rec); err != nil || !ok || rec.Instance == nil {
			return err
		}
		if rec.Instance.StartSeq != seq || rec.Instance.Stage != stage || !change(&n, &rec, now) {
			return nil
		}
		if err := tx.Put(store.Nodes, n.Key(), n); err != nil {
			return err
		}
		changed = true
		return tx.Put(store.Computes, key, rec)
	})
	return key, stage, changed
}

// SetupNotStarted puts back a setup script the store records as running but its node never
// started, because the engine stopped between the two: the next pass starts the same stage
// again under the same task key.
func (c *Controller) SetupNotStarted(nodeID, task string) {
	key, stage, changed := c.updateSetup(nodeID, task, func(n *model.Node, rec *model.Compute, now time.Time) bool {
		inst := rec.Instance
		if !inst.StageRunning {
			return false
		}
		// With no stage begun, nextStage picks this one again: the creation script while
		// creation is not done, else the startup script.
		inst.Stage, inst.StageRunning, inst.StageDue = stageNone, false, time.Time{}
		n.State, n.JobID, n.Task, n.IdleSince = api.NodeIdle, "", "", now
		return true
	})
	if changed {
		c.log.Warn("setup script was not started before the engine stopped; starting it again", "compute", key, "stage", stage)
		c.Kick(key)
	}
}

// SetupExited records the end of a setup script.
func (c *Controller) SetupExited(ctx context.Context, nodeID, task string, code int) {
	if _, _, ok := setupTask(task); !ok {
		return
	}
	output, _ := c.Driver.TaskOutput(ctx, nodeID, task, 0)
	key, stage, _ := c.updateSetup(nodeID, task, func(n *model.Node, rec *model.Compute, now time.Time) bool {
		inst := rec.Instance
		logPath := filepath.Join(c.DataDir, "instances", rec.Workspace, rec.Name, fmt.Sprintf("%s.log", task))
		if err := computes.WriteFileAtomic(logPath, output); err != nil {
			c.log.Error("saving setup script output failed", "compute", rec.Key(), "error", err)
		}
		inst.StageRunning = false
		n.State, n.JobID, n.Task, n.IdleSince = api.NodeIdle, "", "", now
		if code == 0 {
			if inst.Stage == stageCreation {
				inst.CreationDone = true
			}
			return true
		}
		why := fmt.Sprintf("exited with status %d", code)
		if !inst.StageDue.IsZero() && !now.Before(inst.StageDue) {
			why = "timed out"
		}
		inst.State = api.InstanceSetupFailed
		inst.Error = fmt.Sprintf("%s_script %s; its output is in %s; last lines:\n%s", inst.Stage, why, logPath, lastLines(output, 10))
		inst.LastOperation.Status, inst.LastOperation.Time = "Failed", now
		if inst.Stage == stageCreation {
			inst.CreationDone = false
		}
		return true
	})
	if key != "" {
		c.log.Info("setup script exited", "compute", key, "stage", stage, "exit_code", code)
		c.Kick(key)
	}
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Exec runs an interactive session on a running instance's node. The session counts as
// activity from when it opens until it closes.
func (c *Controller) Exec(ctx context.Context, workspace, name string, command []string, stdin io.Reader, output io.Writer) (int, error) {
	if len(command) == 0 {
		return 0, api.Errorf(api.CodeInvalid, "command", "exec needs a command")
	}
	var node string
	err := c.Store.View(func(tx *store.Tx) error {
		rec, err := model.GetCompute(tx, workspace, name)
		if err != nil || rec.Serverless {
			return model.NotFoundCompute(workspace, name)
		}
		if rec.Instance == nil {
			return api.Errorf(api.CodeInvalid, "", "compute %q is a %s; sessions open on compute instances", name, rec.Type)
		}
		if s := rec.Instance.State; s != api.InstanceRunning && s != api.InstanceJobRunning {
			return api.Errorf(api.CodeConflict, "", "compute instance %q is %s; start it first (mlcompute compute start)", name, s)
		}
		nodes, err := store.List[model.Node](tx, store.Nodes, rec.Key()+"/")
		for _, n := range nodes {
			if !n.Released {
				node = n.ID
			}
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	// A session ends with its connection or with the engine: its command never outlives both.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.Ctx, cancel)()
	c.OpenSession(workspace, name)
	defer c.CloseSession(workspace, name)
	c.log.Info("session opened", "compute", workspace+"/"+name)
	code, err := c.Driver.Exec(ctx, node, driver.ExecSpec{Command: command, Stdin: stdin, Output: output,
		Env: map[string]string{"MLCOMPUTE_COMPUTE": name, "MLCOMPUTE_WORKSPACE": workspace}})
	c.log.Info("session closed", "compute", workspace+"/"+name, "exit_code", code)
	return code, err
}
