package sim

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/trigger"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// scheduleModel is a schedule the harness created: when, and its trigger as the rule
// reads it.
type scheduleModel struct {
	ws, name         string
	created          time.Time
	trig             trigger.Trigger
	overlap, catchUp string
}

func (s *scheduleModel) key() string { return s.ws + "/" + s.name }

// ticks lists the schedule's ticks in (from, to].
func (s *scheduleModel) ticks(from, to time.Time) []time.Time {
	var out []time.Time
	for at := from; ; {
		next, ok, err := trigger.Next(s.trig, at)
		if err != nil || !ok || next.After(to) {
			return out
		}
		out = append(out, next)
		at = next
	}
}

var scheduleCrons = []string{"*/20 * * * *", "0 * * * *", "30 */2 * * *", "15 9-17 * * 1-5"}

// createSchedule creates a schedule of a one-node job on one of the harness's clusters,
// with a random cron, overlap and catch-up; at most four live at once.
func (w *world) createSchedule() error {
	if len(w.schedules) >= 4 {
		return w.deleteSchedule()
	}
	var clusters []*computeModel
	for _, k := range sortedKeys(w.computes) {
		if c := w.computes[k]; !c.instance {
			clusters = append(clusters, c)
		}
	}
	if len(clusters) == 0 {
		return w.createCluster()
	}
	c := pick(w, clusters)
	w.scheduleSeq++
	spec := api.JobScheduleSpec{
		Name:      fmt.Sprintf("sched-%d", w.scheduleSeq),
		Trigger:   api.JobScheduleTrigger{Type: trigger.TypeCron, Expression: pick(w, scheduleCrons)},
		CreateJob: "command: train\n",
		Job:       api.JobSpec{Compute: c.name, Command: []string{"train"}},
		Overlap:   pick(w, trigger.Overlaps), CatchUp: pick(w, trigger.CatchUps),
	}
	if _, err := w.e.CreateSchedule(context.Background(), c.ws, spec, ""); err != nil {
		return w.fail("a valid schedule is created", "CreateSchedule %s: %v", spec.Name, err)
	}
	trig, err := validation.ScheduleTrigger(spec.Trigger)
	if err != nil {
		return err
	}
	m := &scheduleModel{ws: c.ws, name: spec.Name, created: w.now(), trig: trig, overlap: spec.Overlap, catchUp: spec.CatchUp}
	w.schedules[m.key()] = m
	w.logf("create schedule %s %q on %s overlap=%s catch_up=%s", m.key(), spec.Trigger.Expression, c.key(), m.overlap, m.catchUp)
	return nil
}

func (w *world) deleteSchedule() error {
	keys := sortedKeys(w.schedules)
	if len(keys) == 0 {
		return w.createSchedule()
	}
	m := w.schedules[pick(w, keys)]
	if err := w.e.DeleteSchedule(context.Background(), m.ws, m.name); err != nil {
		return w.fail("a schedule is deleted", "DeleteSchedule %s: %v", m.key(), err)
	}
	delete(w.schedules, m.key())
	w.logf("delete schedule %s", m.key())
	return nil
}

// scheduleTicks are the schedules' next ticks: the clock stops at each, as a real one
// passes through it, so every tick fires.
func (w *world) scheduleTicks() []time.Time {
	var out []time.Time
	for _, k := range sortedKeys(w.schedules) {
		if next, ok, err := trigger.Next(w.schedules[k].trig, w.now()); err == nil && ok {
			out = append(out, next)
		}
	}
	return out
}

// downtime crashes the engine, moves the clock by 1 to 90 minutes while it is down, and
// starts it again; then each schedule that missed ticks fired exactly one run, for the
// last of them, with catch_up latest (or recorded why not: overlap forbid with its last
// run still active, or its compute gone), and none with catch_up none.
func (w *world) downtime() error {
	down := w.now()
	d := time.Duration(1+w.rng.IntN(90)) * time.Minute
	w.logf("engine down for %s", d)
	w.crash()
	w.clk.SetTime(down.Add(d))
	w.drv.Reopen()
	if err := w.start(); err != nil {
		return w.fail("the engine restarts from its store", "%v", err)
	}
	for _, c := range w.computes {
		c.sessions = 0
	}
	if err := w.settle(); err != nil {
		return err
	}
	for _, k := range sortedKeys(w.schedules) {
		m := w.schedules[k]
		missed := m.ticks(down, w.now())
		var fired []string
		for _, t := range missed {
			if _, ok := w.scheduledJob(m, t); ok {
				fired = append(fired, trigger.JobName(m.name, t))
			}
		}
		w.checks++
		switch {
		case len(missed) == 0 && len(fired) == 0:
		case m.catchUp == trigger.CatchUpNone && len(fired) == 0:
		case m.catchUp == trigger.CatchUpLatest && len(fired) == 1 && fired[0] == trigger.JobName(m.name, missed[len(missed)-1]):
		case m.catchUp == trigger.CatchUpLatest && len(fired) == 0 && w.skipped(m, missed[len(missed)-1]):
			// overlap forbid with its last run active, or a job the engine refused (its
			// compute deleted): recorded with the reason.
		default:
			return w.fail("a schedule catches up once after downtime", "schedule %s (catch_up %s, overlap %s) missed %d ticks %v and fired %v",
				m.key(), m.catchUp, m.overlap, len(missed), missed, fired)
		}
	}
	return nil
}

// scheduledJob returns the job a schedule's tick started, if any.
func (w *world) scheduledJob(m *scheduleModel, tick time.Time) (*api.Job, bool) {
	j, err := w.e.GetJob(context.Background(), m.ws, trigger.JobName(m.name, tick))
	return j, err == nil && j.Schedule == m.name
}

// record reads a schedule as stored.
func (w *world) record(m *scheduleModel) (model.Schedule, error) {
	var s model.Schedule
	err := w.st.View(func(tx *store.Tx) error {
		var err error
		s, err = model.GetSchedule(tx, m.ws, m.name)
		return err
	})
	return s, err
}

func (w *world) skipped(m *scheduleModel, tick time.Time) bool {
	s, err := w.record(m)
	return err == nil && s.LastSkip != nil && s.LastSkip.Tick.Equal(tick) && s.LastSkip.Reason != ""
}

// checkSchedules holds the schedules' rules: a job a schedule started is named for one of
// its ticks, none before it was created nor after now; the schedule acted on its latest
// tick (the clock stops at every tick, so it acted on each), starting its job or recording
// why not; with overlap forbid or replace, at most one of its runs is active.
func (w *world) checkSchedules(jobs []api.Job) error {
	now := w.now()
	active := map[string][]string{}
	for _, j := range jobs {
		if j.Schedule == "" {
			continue
		}
		m, ok := w.schedules[j.Workspace+"/"+j.Schedule]
		if !ok {
			continue // its schedule was deleted; its runs run on
		}
		w.checks++
		stamp, found := strings.CutPrefix(j.ID, m.name+"-")
		tick, err := time.Parse("20060102T150405Z", stamp)
		if !found || err != nil {
			return w.fail("a tick's job is named for it", "job %s of schedule %s is not named <schedule>-YYYYMMDDThhmmssZ", j.ID, m.key())
		}
		if ticks := m.ticks(tick.Add(-time.Nanosecond), tick); len(ticks) != 1 || tick.After(now) || !tick.After(m.created) {
			return w.fail("a schedule fires at its ticks", "job %s of schedule %s: %s is not one of its ticks in (%s, %s]", j.ID, m.key(), tick, m.created, now)
		}
		if !api.Terminal(j.Status) {
			active[m.key()] = append(active[m.key()], j.ID)
		}
	}
	for _, k := range sortedKeys(w.schedules) {
		m := w.schedules[k]
		if m.overlap != trigger.OverlapAllow && len(active[k]) > 1 {
			w.checks++
			return w.fail("overlap forbid and replace keep one run active", "schedule %s (overlap %s) has runs %v active", k, m.overlap, active[k])
		}
		ticks := m.ticks(m.created, now)
		if len(ticks) == 0 {
			continue
		}
		latest := ticks[len(ticks)-1]
		s, err := w.record(m)
		if err != nil {
			return w.fail("the engine answers", "schedule %s: %v", k, err)
		}
		w.checks++
		if s.LastTick == nil || !s.LastTick.Equal(latest) || s.Firing != nil {
			return w.fail("a schedule fires every tick", "schedule %s: latest tick %s, acted on %v (firing %v)", k, latest, s.LastTick, s.Firing)
		}
		if _, ok := w.scheduledJob(m, latest); !ok && !w.skipped(m, latest) {
			return w.fail("a schedule fires every tick", "schedule %s: tick %s started no job and recorded no reason", k, latest)
		}
		if s.NextRunTime == nil || !s.NextRunTime.After(now) {
			return w.fail("a schedule has its next tick ahead", "schedule %s: next_run_time %v at %s", k, s.NextRunTime, now)
		}
	}
	return nil
}
