package engine

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/idle"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/schedule"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// A compute instance is a compute of one node that a person uses. The engine keeps its
// desired state (Running or Stopped, set by the user, a schedule or idle shutdown) apart
// from its arguments, so an apply that changes arguments never restarts an instance that
// was stopped. Reconciling an instance: fire due schedules, stop it when idle, bring a node
// up or down to match the desired state, and run the setup scripts on a fresh node
// (creation once, startup at every start).

// Setup stages of the current start.
const (
	stageNone     = ""
	stageCreation = "creation"
	stageStartup  = "startup"
	stageDone     = "done"
)

func (e *Engine) instanceIdleAfter(rec model.Compute) time.Duration {
	d, _ := validation.IdleTimeBeforeShutdown(rec.Instance.Settings.IdleTimeBeforeShutdown, 0)
	return d
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
func (e *Engine) validateInstance(s api.InstanceSettings) error {
	if _, err := validation.IdleTimeBeforeShutdown(s.IdleTimeBeforeShutdown, e.minIdleShutdown); err != nil {
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
func (e *Engine) newInstanceRecord(spec api.ComputeSpec, size catalog.Size, workspace string, now time.Time) (model.Compute, error) {
	settings := normalizeInstance(spec.Instance)
	if err := e.validateInstance(settings); err != nil {
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

// updateInstance applies an update to an instance record. Callers hold e.mu.
func (e *Engine) updateInstance(rec *model.Compute, upd api.ComputeUpdate, now time.Time) error {
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
		if err := e.validateInstance(settings); err != nil {
			return err
		}
		oldIdle := e.instanceIdleAfter(*rec)
		newIdle, _ := validation.IdleTimeBeforeShutdown(settings.IdleTimeBeforeShutdown, 0)
		inst.LastActivity = idle.OnSettingChange(e.activity(*rec), oldIdle, newIdle, now)
		if fmt.Sprint(settings.Schedules) != fmt.Sprint(inst.Settings.Schedules) {
			inst.SchedulesSeen = now // a new schedule never fires for a time before it existed
		}
		inst.Settings = settings
	}
	return nil
}

// activity is an instance's activity as the idle rule sees it.
func (e *Engine) activity(rec model.Compute) idle.Activity {
	a := idle.Activity{LastActivity: rec.Instance.LastActivity, OpenSessions: e.sessions[rec.Key()]}
	if rec.Instance.State == api.InstanceJobRunning {
		a.RunningJobs = 1
	}
	return a
}

// InstanceAction starts, stops or restarts an instance for a user.
func (e *Engine) InstanceAction(_ context.Context, workspace, name, action string) (*api.Compute, error) {
	e.mu.Lock()
	now := e.clock.Now().UTC()
	err := e.store.Update(func(tx *store.Tx) error {
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
			rec.Instance.LastActivity = e.activity(rec).Touch(now).LastActivity
			e.setDesired(&rec, api.InstanceRunning, "Start", api.TriggerUser, now)
		case api.ActionStop:
			e.setDesired(&rec, api.InstanceStopped, "Stop", api.TriggerUser, now)
		case api.ActionRestart:
			// Restart: release the node (if any) and start a fresh one.
			rec.Instance.Desired, rec.Instance.Resizing = api.InstanceRunning, true
			rec.Instance.LastOperation = api.Operation{Name: "Restart", Status: "InProgress", Trigger: api.TriggerUser, Time: now}
		default:
			return api.Errorf(api.CodeInvalid, "action", "unknown action %q; allowed: start, stop, restart", action)
		}
		return tx.Put(store.Computes, rec.Key(), rec)
	})
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	e.kick(workspace + "/" + name)
	return e.GetCompute(context.Background(), workspace, name)
}

// ReportActivity records activity on an instance reported by an application on it.
func (e *Engine) ReportActivity(_ context.Context, workspace, name string) error {
	e.mu.Lock()
	err := e.store.Update(func(tx *store.Tx) error {
		rec, err := model.GetCompute(tx, workspace, name)
		if err != nil || rec.Instance == nil {
			return model.NotFoundCompute(workspace, name)
		}
		rec.Instance.LastActivity = e.activity(rec).Touch(e.clock.Now().UTC()).LastActivity
		return tx.Put(store.Computes, rec.Key(), rec)
	})
	e.mu.Unlock()
	if err == nil {
		e.kick(workspace + "/" + name)
	}
	return err
}

// OpenSession and CloseSession count interactive sessions on an instance: an open
// session keeps it awake, and closing one counts as activity.
func (e *Engine) OpenSession(workspace, name string) {
	e.mu.Lock()
	e.sessions[workspace+"/"+name]++
	e.mu.Unlock()
	e.kick(workspace + "/" + name)
}

func (e *Engine) CloseSession(workspace, name string) {
	key := workspace + "/" + name
	e.mu.Lock()
	if e.sessions[key] > 0 {
		e.sessions[key]--
	}
	_ = e.store.Update(func(tx *store.Tx) error {
		rec, err := model.GetCompute(tx, workspace, name)
		if err != nil || rec.Instance == nil {
			return nil
		}
		rec.Instance.LastActivity = e.activity(rec).Touch(e.clock.Now().UTC()).LastActivity
		return tx.Put(store.Computes, key, rec)
	})
	e.mu.Unlock()
	e.kick(key)
}

func (e *Engine) setDesired(rec *model.Compute, desired, op, trigger string, now time.Time) {
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

// instanceActions is what one pass over an instance decided; the caller acts after commit.
type instanceActions struct {
	stop     []model.Node
	setup    *driver.TaskSpec
	setupOn  string
	kill     []taskRef
	startJob []model.Job
	cancel   []model.Job
}

// reconcileInstance decides one pass for an instance. Callers hold e.mu and the transaction.
func (e *Engine) reconcileInstance(tx *store.Tx, rec *model.Compute, nodes []model.Node, jobs []model.Job, now time.Time) (instanceActions, error) {
	var out instanceActions
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
		e.setDesired(rec, desired, op, api.TriggerSchedule, now)
		e.log.Info("schedule fired", "compute", key, "action", f.Action, "at", f.At)
	}
	inst.SchedulesSeen = now
	if f, ok, err := schedule.NextFiring(entries, now); err == nil && ok {
		e.loop.SetTimer(instanceTimer(runtime.Schedule, key), f.At)
	} else {
		e.loop.RemoveTimer(instanceTimer(runtime.Schedule, key))
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
		inst.LastActivity = e.activity(*rec).Touch(node.IdleSince).LastActivity
	}

	release := func() error {
		if node == nil {
			return nil
		}
		if node.Task != "" {
			out.kill = append(out.kill, taskRef{node: node.ID, task: node.Task})
		}
		node.Released, node.State = true, api.NodeLeaving
		if err := tx.Put(store.Nodes, node.Key(), *node); err != nil {
			return err
		}
		out.stop = append(out.stop, *node)
		return nil
	}
	cancelJobs := func(why string) error {
		for _, j := range jobs {
			j.Finish(api.JobCanceled, nil, why, now)
			if err := tx.Put(store.Jobs, j.Key(), j); err != nil {
				return err
			}
			out.cancel = append(out.cancel, j)
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
		n := model.Node{ID: e.newID("node"), Compute: key, State: api.NodePreparing, CreatedOn: now}
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
				out.kill = append(out.kill, taskRef{node: node.ID, task: node.Task})
			} else {
				e.loop.SetTimer(instanceTimer(runtime.SetupTimeout, key), inst.StageDue)
			}
			return out, nil
		}
		stage, script := nextStage(inst)
		if script == nil {
			inst.Stage = stageDone
			inst.State, inst.LastActivity = api.InstanceRunning, e.activity(*rec).Touch(now).LastActivity
			inst.LastOperation.Status, inst.LastOperation.Time = "Succeeded", now
			e.kick(key)
			return out, nil
		}
		timeout, _ := validation.Duration("timeout", script.Timeout, time.Second, 24*time.Hour)
		inst.Stage, inst.StageRunning, inst.StageDue = stage, true, now.Add(timeout)
		task := fmt.Sprintf("setup-%d-%s", inst.StartSeq, stage)
		node.State, node.JobID, node.Task = api.NodeRunning, "setup", task
		if err := tx.Put(store.Nodes, node.Key(), *node); err != nil {
			return out, err
		}
		out.setup = &driver.TaskSpec{Key: task, Command: []string{"sh", "-c", script.Inline}, Env: map[string]string{"MLCOMPUTE_COMPUTE": rec.Name, "MLCOMPUTE_WORKSPACE": rec.Workspace}}
		out.setupOn = node.ID
		e.loop.SetTimer(instanceTimer(runtime.SetupTimeout, key), inst.StageDue)
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
			if err := tx.Put(store.Jobs, j.Key(), j); err != nil {
				return out, err
			}
			out.startJob = append(out.startJob, j)
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
	if after := e.instanceIdleAfter(*rec); after > 0 {
		a := idle.Activity{LastActivity: inst.LastActivity, OpenSessions: e.sessions[key]}
		if running {
			a.RunningJobs = 1
		}
		if d := idle.Decide(a, after, now); !d.Stop && d.Deadline.IsZero() {
			e.loop.RemoveTimer(instanceTimer(runtime.InstanceIdle, key))
		} else if !d.Stop {
			e.loop.SetTimer(instanceTimer(runtime.InstanceIdle, key), d.Deadline)
		} else {
			e.loop.RemoveTimer(instanceTimer(runtime.InstanceIdle, key))
			e.setDesired(rec, api.InstanceStopped, "Stop", api.TriggerIdleShutdown, now)
			e.log.Warn("instance stopped for idleness", "compute", key, "idle_for", now.Sub(a.LastActivity).String())
			e.kick(key)
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

// setupExited records the end of a setup script.
func (e *Engine) setupExited(ctx context.Context, nodeID, task string, code int) {
	parts := strings.SplitN(task, "-", 3) // setup-<seq>-<stage>
	if len(parts) != 3 {
		return
	}
	seq, err := strconv.Atoi(parts[1])
	if err != nil {
		return
	}
	stage := parts[2]
	output, _ := e.driver.TaskOutput(ctx, nodeID, task, 0)
	e.mu.Lock()
	now := e.clock.Now().UTC()
	var key string
	_ = e.store.Update(func(tx *store.Tx) error {
		n, ok := e.nodeByID(tx, nodeID)
		if !ok || n.Task != task {
			return nil
		}
		key = n.Compute
		var rec model.Compute
		if ok, err := tx.Get(store.Computes, key, &rec); err != nil || !ok || rec.Instance == nil {
			return err
		}
		inst := rec.Instance
		if inst.StartSeq != seq || inst.Stage != stage {
			return nil
		}
		logPath := filepath.Join(e.dataDir, "instances", rec.Workspace, rec.Name, fmt.Sprintf("%s.log", task))
		if err := writeFileAtomic(logPath, output); err != nil {
			e.log.Error("saving setup script output failed", "compute", key, "error", err)
		}
		inst.StageRunning = false
		n.State, n.JobID, n.Task, n.IdleSince = api.NodeIdle, "", "", now
		if code == 0 {
			if stage == stageCreation {
				inst.CreationDone = true
			}
		} else {
			why := fmt.Sprintf("exited with status %d", code)
			if !inst.StageDue.IsZero() && !now.Before(inst.StageDue) {
				why = "timed out"
			}
			inst.State = api.InstanceSetupFailed
			inst.Error = fmt.Sprintf("%s_script %s; its output is in %s; last lines:\n%s", stage, why, logPath, lastLines(output, 10))
			inst.LastOperation.Status, inst.LastOperation.Time = "Failed", now
			if stage == stageCreation {
				inst.CreationDone = false
			}
		}
		if err := tx.Put(store.Nodes, n.Key(), n); err != nil {
			return err
		}
		return tx.Put(store.Computes, key, rec)
	})
	e.mu.Unlock()
	if key != "" {
		e.log.Info("setup script exited", "compute", key, "stage", stage, "exit_code", code)
		e.kick(key)
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
func (e *Engine) Exec(ctx context.Context, workspace, name string, command []string, stdin io.Reader, output io.Writer) (int, error) {
	if len(command) == 0 {
		return 0, api.Errorf(api.CodeInvalid, "command", "exec needs a command")
	}
	var node string
	err := e.store.View(func(tx *store.Tx) error {
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
	defer context.AfterFunc(e.ctx, cancel)()
	e.OpenSession(workspace, name)
	defer e.CloseSession(workspace, name)
	e.log.Info("session opened", "compute", workspace+"/"+name)
	code, err := e.driver.Exec(ctx, node, driver.ExecSpec{Command: command, Stdin: stdin, Output: output,
		Env: map[string]string{"MLCOMPUTE_COMPUTE": name, "MLCOMPUTE_WORKSPACE": workspace}})
	e.log.Info("session closed", "compute", workspace+"/"+name, "exit_code", code)
	return code, err
}
