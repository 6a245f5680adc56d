// Package schedules is the controller of mlcompute_schedule records (DESIGN 3, 4): it keeps
// each enabled schedule's next tick in the engine's timer queue and, when a tick is due,
// applies rules/trigger: which tick to fire (the one catch-up run after downtime), what
// overlap does with a run still active, and the name of the job, which it submits through
// the engine's own job submission. The decision is committed before the submission, so an
// engine killed in between submits that job, under the same name, and no other.
package schedules

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/trigger"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// Jobs is the engine's job API, which the ticks' jobs go through as any user's.
type Jobs interface {
	SubmitJob(ctx context.Context, workspace string, spec api.JobSpec, idempotencyKey string) (*api.Job, error)
	GetJob(ctx context.Context, workspace, id string) (*api.Job, error)
	CancelJob(ctx context.Context, workspace, id string) (*api.Job, error)
}

// Timers is the engine's timer queue.
type Timers interface {
	SetTimer(t runtime.Timer, at time.Time)
	RemoveTimer(t runtime.Timer)
}

// Config is what the controller is built from.
type Config struct {
	Store  *store.Store
	Clock  clock.PassiveClock
	Logger hclog.Logger
	Jobs   Jobs
	Timers Timers
	// Mark has a schedule ("<workspace>/<name>") reconciled.
	Mark func(key string)
}

// Controller manages schedules.
type Controller struct {
	store  *store.Store
	clock  clock.PassiveClock
	log    hclog.Logger
	jobs   Jobs
	timers Timers
	mark   func(string)
	// startedAt is when this engine started: a tick before it was missed while the engine
	// was down, which only catch_up "latest" fires.
	startedAt time.Time
	mu        sync.Mutex // serialises writers, so a create's existence check holds until it commits
}

// New builds the controller.
func New(cfg Config) *Controller {
	return &Controller{
		store: cfg.Store, clock: cfg.Clock, log: cfg.Logger.Named("schedules"), jobs: cfg.Jobs, timers: cfg.Timers,
		mark: cfg.Mark, startedAt: cfg.Clock.Now().UTC(),
	}
}

// Name names the controller in logs.
func (c *Controller) Name() string { return "schedules" }

// Validate checks a schedule's settings, naming the attribute at fault and the values
// allowed. The job is checked when a tick submits it (its compute may come later).
func Validate(name string, t api.JobScheduleTrigger, job api.JobSpec, overlap, catchUp string) error {
	if err := validation.ScheduleName.Check("name", name); err != nil {
		return err
	}
	if _, err := validation.ScheduleTrigger(t); err != nil {
		return err
	}
	if err := validation.ScheduleOverlap(overlap); err != nil {
		return err
	}
	if err := validation.ScheduleCatchUp(catchUp); err != nil {
		return err
	}
	if job.Type == api.JobTypePipeline && job.Pipeline == nil || job.Type != api.JobTypePipeline && len(job.Command) == 0 {
		return api.Errorf(api.CodeInvalid, "create_job", "create_job holds no command and no pipeline steps")
	}
	return nil
}

// Create stores a new schedule with its next tick. A retry with the same idempotency key
// returns the schedule the first attempt made; any other create of a taken name is a
// conflict.
func (c *Controller) Create(ctx context.Context, workspace string, spec api.JobScheduleSpec, idempotencyKey string) (*api.JobSchedule, error) {
	spec.Overlap, spec.CatchUp = defaults(spec.Overlap, spec.CatchUp)
	if err := Validate(spec.Name, spec.Trigger, spec.Job, spec.Overlap, spec.CatchUp); err != nil {
		return nil, err
	}
	if spec.Enabled == nil {
		spec.Enabled = ptr(true)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := api.ScheduleID(workspace, spec.Name)
	var out model.Schedule
	err := c.store.Update(func(tx *store.Tx) error {
		if _, err := model.GetWorkspace(tx, workspace); err != nil {
			return err
		}
		if done, err := model.Replayed(tx, idempotencyKey, id); done || err != nil {
			if done {
				out, err = model.GetSchedule(tx, workspace, spec.Name)
			}
			return err
		}
		if _, err := model.GetSchedule(tx, workspace, spec.Name); err == nil {
			return api.Errorf(api.CodeConflict, "name",
				"schedule %q already exists in workspace %q; to manage it with Terraform, import it: terraform import mlcompute_schedule.<name> %s",
				spec.Name, workspace, id)
		}
		now := c.clock.Now().UTC()
		out = model.Schedule{JobSchedule: api.JobSchedule{JobScheduleSpec: spec, ID: id, Workspace: workspace, CreatedOn: now, UpdatedOn: now}}
		c.plan(&out, now)
		if err := tx.Put(store.Schedules, out.Key(), out); err != nil {
			return err
		}
		return model.Remember(tx, idempotencyKey, id, now)
	})
	if err != nil {
		return nil, err
	}
	c.log.Info("schedule created", "schedule", id, "next_run_time", out.NextRunTime)
	c.mark(out.Key())
	return c.view(ctx, out), nil
}

// Update replaces a schedule's settings; its next tick is computed anew from now, and its
// last run is kept.
func (c *Controller) Update(ctx context.Context, workspace, name string, upd api.JobScheduleUpdate) (*api.JobSchedule, error) {
	upd.Overlap, upd.CatchUp = defaults(upd.Overlap, upd.CatchUp)
	if err := Validate(name, upd.Trigger, upd.Job, upd.Overlap, upd.CatchUp); err != nil {
		return nil, err
	}
	if upd.Enabled == nil {
		upd.Enabled = ptr(true)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out model.Schedule
	err := c.store.Update(func(tx *store.Tx) error {
		var err error
		if out, err = model.GetSchedule(tx, workspace, name); err != nil {
			return err
		}
		now := c.clock.Now().UTC()
		out.JobScheduleSpec = api.JobScheduleSpec{
			Name: name, Trigger: upd.Trigger, CreateJob: upd.CreateJob, Job: upd.Job, ContentHash: upd.ContentHash, BasePath: upd.BasePath,
			Enabled: upd.Enabled, Overlap: upd.Overlap, CatchUp: upd.CatchUp,
		}
		out.UpdatedOn = now
		c.plan(&out, now)
		return tx.Put(store.Schedules, out.Key(), out)
	})
	if err != nil {
		return nil, err
	}
	c.log.Info("schedule updated", "schedule", out.ID, "next_run_time", out.NextRunTime)
	c.mark(out.Key())
	return c.view(ctx, out), nil
}

// Get returns a schedule, its last run's status as of now.
func (c *Controller) Get(ctx context.Context, workspace, name string) (*api.JobSchedule, error) {
	var s model.Schedule
	err := c.store.View(func(tx *store.Tx) error {
		var err error
		s, err = model.GetSchedule(tx, workspace, name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.view(ctx, s), nil
}

// List returns a workspace's schedules, by name.
func (c *Controller) List(ctx context.Context, workspace string) ([]api.JobSchedule, error) {
	var all []model.Schedule
	err := c.store.View(func(tx *store.Tx) error {
		if _, err := model.GetWorkspace(tx, workspace); err != nil {
			return err
		}
		var err error
		all, err = store.List[model.Schedule](tx, store.Schedules, workspace+"/")
		return err
	})
	out := make([]api.JobSchedule, 0, len(all))
	for _, s := range all {
		out = append(out, *c.view(ctx, s))
	}
	return out, err
}

// Delete deletes a schedule; the jobs it started run on. Deleting a missing schedule is
// not_found.
func (c *Controller) Delete(_ context.Context, workspace, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.store.Update(func(tx *store.Tx) error {
		s, err := model.GetSchedule(tx, workspace, name)
		if err != nil {
			return err
		}
		return tx.Delete(store.Schedules, s.Key())
	})
	if err != nil {
		return err
	}
	c.log.Info("schedule deleted", "schedule", api.ScheduleID(workspace, name))
	c.mark(workspace + "/" + name)
	return nil
}

// Keys lists every schedule's key, for the engine to reconcile them at start.
func (c *Controller) Keys() []string {
	var keys []string
	_ = c.store.View(func(tx *store.Tx) error {
		keys = tx.Keys(store.Schedules, "")
		return nil
	})
	return keys
}

// Reconcile brings one schedule ("<workspace>/<name>") up to now: it finishes a
// submission an earlier pass committed, fires the tick that is due (the latest one when
// several are), and sets the timer of the next. It decides from the stored record only,
// so it is safe to run twice.
func (c *Controller) Reconcile(ctx context.Context, key string) {
	timer := runtime.Timer{Kind: runtime.Schedule, Object: runtime.JobScheduleKey(key)}
	workspace, name, _ := strings.Cut(key, "/")
	s, err := c.load(workspace, name)
	if err != nil {
		c.timers.RemoveTimer(timer)
		if !api.IsNotFound(err) {
			c.log.Error("reading schedule failed", "schedule", key, "error", err)
		}
		return
	}
	if s.Firing != nil {
		if s, err = c.submit(ctx, s, *s.Firing); err != nil {
			c.log.Error("recording a schedule's run failed", "schedule", key, "error", err)
			return
		}
	}
	now := c.clock.Now().UTC()
	if s.NextRunTime == nil || !*s.Enabled {
		c.timers.RemoveTimer(timer)
		return
	}
	if s.NextRunTime.After(now) {
		c.timers.SetTimer(timer, *s.NextRunTime)
		return
	}
	if s, err = c.decide(ctx, s, now); err != nil {
		c.log.Error("recording a schedule's tick failed", "schedule", key, "error", err)
		return
	}
	if s.Firing != nil {
		if s, err = c.submit(ctx, s, *s.Firing); err != nil {
			c.log.Error("recording a schedule's run failed", "schedule", key, "error", err)
			return
		}
	}
	if s.NextRunTime != nil {
		c.timers.SetTimer(timer, *s.NextRunTime)
	} else {
		c.timers.RemoveTimer(timer)
	}
}

// decide commits what the due ticks do: the latest of them fires (or is skipped, with its
// reason), and the next tick after now is the schedule's next.
func (c *Controller) decide(ctx context.Context, s model.Schedule, now time.Time) (model.Schedule, error) {
	t, err := validation.ScheduleTrigger(s.Trigger)
	if err != nil {
		return s, err
	}
	tick := *s.NextRunTime
	if latest, ok, err := trigger.Missed(t, trigger.CatchUpLatest, tick.Add(-time.Nanosecond), now); err == nil && ok {
		tick = latest
	}
	action, reason := trigger.Skip, "missed while the engine was down, and catch_up is none"
	if !tick.Before(c.startedAt) || s.CatchUp != trigger.CatchUpNone {
		action, reason = trigger.OnTick(s.Overlap, c.active(ctx, s), s.LastRunJob)
	}
	s, err = c.write(s, func(s *model.Schedule) {
		s.LastTick = &tick
		s.NextRunTime = next(t, now)
		if action == trigger.Skip {
			s.LastSkip = &api.ScheduleSkip{Tick: tick, Reason: reason}
			return
		}
		s.Firing = &tick
	})
	if err == nil && action == trigger.Skip {
		c.log.Warn("schedule tick skipped", "schedule", s.ID, "tick", tick, "reason", reason)
	}
	return s, err
}

// submit submits a tick's job: with overlap replace the active run is canceled first. The
// job's name and idempotency key are the tick's, so a submission redone after a crash
// finds the job the first one made.
func (c *Controller) submit(ctx context.Context, s model.Schedule, tick time.Time) (model.Schedule, error) {
	name := trigger.JobName(s.Name, tick)
	if s.Overlap == trigger.OverlapReplace && s.LastRunJob != "" && s.LastRunJob != name && c.active(ctx, s) {
		if _, err := c.jobs.CancelJob(ctx, s.Workspace, s.LastRunJob); err != nil && !api.IsNotFound(err) {
			c.log.Error("canceling the run a tick replaces failed", "schedule", s.ID, "job", s.LastRunJob, "error", err)
		} else {
			c.log.Info("schedule run replaced", "schedule", s.ID, "job", s.LastRunJob)
		}
	}
	spec := s.Job
	spec.Name, spec.Schedule = name, s.Name
	j, err := c.jobs.SubmitJob(ctx, s.Workspace, spec, "schedule:"+s.Key()+"@"+tick.Format(time.RFC3339))
	if api.IsConflict(err) {
		// The tick's job exists: an earlier submission made it and its key was forgotten.
		if prior, gerr := c.jobs.GetJob(ctx, s.Workspace, name); gerr == nil && prior.Schedule == s.Name {
			j, err = prior, nil
		}
	}
	if err == nil {
		c.log.Info("schedule fired", "schedule", s.ID, "tick", tick, "job", j.ID, "lateness", c.clock.Now().Sub(tick))
	} else {
		c.log.Error("submitting a schedule's job failed", "schedule", s.ID, "tick", tick, "error", err)
	}
	return c.write(s, func(s *model.Schedule) {
		s.Firing = nil
		if err != nil {
			s.LastSkip = &api.ScheduleSkip{Tick: tick, Reason: fmt.Sprintf("submitting job %s failed: %v", name, err)}
			return
		}
		s.LastRunJob, s.LastRunStatus = j.ID, j.Status
	})
}

// active reports whether the schedule's last run has not ended.
func (c *Controller) active(ctx context.Context, s model.Schedule) bool {
	if s.LastRunJob == "" {
		return false
	}
	j, err := c.jobs.GetJob(ctx, s.Workspace, s.LastRunJob)
	return err == nil && !api.Terminal(j.Status)
}

// write applies f to the stored schedule, commits it and returns it as committed.
func (c *Controller) write(s model.Schedule, f func(*model.Schedule)) (model.Schedule, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var cur model.Schedule
	err := c.store.Update(func(tx *store.Tx) error {
		var err error
		if cur, err = model.GetSchedule(tx, s.Workspace, s.Name); err != nil {
			return err
		}
		f(&cur)
		return tx.Put(store.Schedules, cur.Key(), cur)
	})
	return cur, err
}

func (c *Controller) load(workspace, name string) (model.Schedule, error) {
	var s model.Schedule
	err := c.store.View(func(tx *store.Tx) error {
		var err error
		s, err = model.GetSchedule(tx, workspace, name)
		return err
	})
	return s, err
}

// plan sets a created or updated schedule's next tick: the first after now, none when it
// is disabled or its ticks are over.
func (c *Controller) plan(s *model.Schedule, now time.Time) {
	s.NextRunTime = nil
	if !*s.Enabled {
		return
	}
	if t, err := validation.ScheduleTrigger(s.Trigger); err == nil {
		s.NextRunTime = next(t, now)
	}
}

// view is the schedule as the API shows it, its last run's status read now.
func (c *Controller) view(ctx context.Context, s model.Schedule) *api.JobSchedule {
	out := s.JobSchedule
	if out.LastRunJob != "" {
		if j, err := c.jobs.GetJob(ctx, s.Workspace, s.LastRunJob); err == nil {
			out.LastRunStatus = j.Status
		}
	}
	return &out
}

func next(t trigger.Trigger, after time.Time) *time.Time {
	at, ok, err := trigger.Next(t, after)
	if err != nil || !ok {
		return nil
	}
	return &at
}

func defaults(overlap, catchUp string) (string, string) {
	if overlap == "" {
		overlap = trigger.OverlapForbid
	}
	if catchUp == "" {
		catchUp = trigger.CatchUpLatest
	}
	return overlap, catchUp
}

func ptr[T any](v T) *T { return &v }
